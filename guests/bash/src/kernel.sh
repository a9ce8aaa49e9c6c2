# sandlot's Bash kernel: runs cells of code in one shell, so variables, functions,
# aliases and the working directory's changes persist from one run to the next.
#
# The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
# `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
# `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
# SIGINT interrupts the running cell (and what it runs in the foreground), never the
# kernel. `exit` in a cell ends the kernel: the next run starts a fresh one.
__sandlot_cells=$SANDLOT_CELL_FD
__sandlot_done=$SANDLOT_DONE_FD
unset SANDLOT_CELL_FD SANDLOT_DONE_FD
# Beside the driver, in the workspace: the container's root is read-only.
__sandlot_dir=${BASH_SOURCE[0]%/*}/bash
mkdir -p "$__sandlot_dir" || exit 2
__sandlot_running=
# In a cell, the trap's `return` leaves the sourced cell; between cells it does nothing.
trap '[[ -n $__sandlot_running ]] && { __sandlot_running=; echo Interrupted >&2; return 130; }' INT

__sandlot_take() {
  # Exactly $1 bytes, any bytes: head reads no more than it is asked for. Empty parts
  # (most runs' input and environment) cost no process.
  if (($1 == 0)); then
    : >"$__sandlot_dir/$2"
  else
    head -c "$1" <&"$__sandlot_cells" >"$__sandlot_dir/$2"
  fi
}

printf 'ready\n' >&"$__sandlot_done"
while :; do
  until IFS=' ' read -r __sandlot_tag __sandlot_code __sandlot_stdin __sandlot_env __sandlot_cwd <&"$__sandlot_cells"; do
    # A read cut short by a signal is tried again; the end of the input ends the kernel.
    (($? > 128)) || exit 0
  done
  if [[ $__sandlot_tag != sandlot-cell ]]; then
    echo "sandlot kernel: malformed cell header" >&2
    exit 2
  fi
  __sandlot_take "$__sandlot_code" cell
  __sandlot_take "$__sandlot_stdin" stdin
  __sandlot_take "$__sandlot_env" env
  # A path has no NUL byte: the shell reads it itself (bytes, in the C locale).
  LC_ALL=C read -r -N "$__sandlot_cwd" __sandlot_where <&"$__sandlot_cells"
  __sandlot_saved=()
  while IFS= read -r -d '' __sandlot_item; do
    __sandlot_key=${__sandlot_item%%=*}
    if [[ -v $__sandlot_key ]]; then
      __sandlot_saved+=("$(declare -p "$__sandlot_key")")
    else
      __sandlot_saved+=("unset $__sandlot_key")
    fi
    export "$__sandlot_item"
  done <"$__sandlot_dir/env"
  cd -- "$__sandlot_where" || exit 2
  __sandlot_running=1
  source "$__sandlot_dir/cell" <"$__sandlot_dir/stdin"
  __sandlot_status=$?
  __sandlot_running=
  for __sandlot_item in "${__sandlot_saved[@]}"; do
    eval "$__sandlot_item"
  done
  # As a process's exit status would be.
  printf '%d\n' "$((__sandlot_status & 255))" >&"$__sandlot_done"
done
