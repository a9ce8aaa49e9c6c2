# sandlot's Bash kernel: runs cells of code in one shell, so variables, functions,
# aliases and the working directory's changes persist from one run to the next.
#
# The agent sends each cell on the descriptor in SANDLOT_CELL_FD, framed as
# `sandlot-cell CODE STDIN ENV CWD` plus that many bytes of each; the kernel answers
# `ready` once, then each cell's exit status, on the descriptor in SANDLOT_DONE_FD.
# SIGINT interrupts the running cell (and what it runs in the foreground), never the
# kernel. `exit` in a cell ends the kernel: the next run starts a fresh one.
#
# Cells may define functions of any name: the driver calls builtins with `builtin`
# and programs with `command`, so a cell's `head` or `read` cannot break the framing.
__sandlot_cells=$SANDLOT_CELL_FD
__sandlot_done=$SANDLOT_DONE_FD
builtin unset SANDLOT_CELL_FD SANDLOT_DONE_FD
__sandlot_driver=${BASH_SOURCE[0]}
# Beside the driver, in the workspace: the container's root is read-only.
__sandlot_dir=${BASH_SOURCE[0]%/*}/bash
command mkdir -p "$__sandlot_dir" || builtin exit 2
__sandlot_running=
__sandlot_abort=
# An interrupt leaves the cell however deep in functions it is: with extdebug, a DEBUG
# trap that returns 2 makes the running function, or the sourced cell, return. The
# trap is set only once interrupted, so cells run at full speed otherwise.
builtin shopt -s extdebug
__sandlot_unwind() {
  if [[ ${BASH_SOURCE[1]} == "$__sandlot_driver" ]]; then
    # Back in the driver: the cell has been left.
    builtin trap - DEBUG
    return 0
  fi
  return 2
}
builtin trap '[[ -n $__sandlot_running ]] && { __sandlot_running=; __sandlot_abort=1; builtin trap __sandlot_unwind DEBUG; }' INT

__sandlot_take() {
  # Exactly $1 bytes, any bytes: head reads no more than it is asked for. Empty parts
  # (most runs' input and environment) cost no process.
  if (($1 == 0)); then
    builtin : >"$__sandlot_dir/$2"
  else
    command head -c "$1" <&"$__sandlot_cells" >"$__sandlot_dir/$2"
  fi
}

builtin printf 'ready\n' >&"$__sandlot_done"
while builtin true; do
  until IFS=' ' builtin read -r __sandlot_tag __sandlot_code __sandlot_stdin __sandlot_env __sandlot_cwd <&"$__sandlot_cells"; do
    # A read cut short by a signal is tried again; the end of the input ends the kernel.
    (($? > 128)) || builtin exit 0
  done
  if [[ $__sandlot_tag != sandlot-cell ]]; then
    builtin echo "sandlot kernel: malformed cell header" >&2
    builtin exit 2
  fi
  __sandlot_take "$__sandlot_code" cell
  __sandlot_take "$__sandlot_stdin" stdin
  __sandlot_take "$__sandlot_env" env
  # A path has no NUL byte: the shell reads it itself (bytes, in the C locale).
  LC_ALL=C builtin read -r -N "$__sandlot_cwd" __sandlot_where <&"$__sandlot_cells"
  __sandlot_saved=()
  __sandlot_keys=" "
  while IFS= builtin read -r -d '' __sandlot_item; do
    __sandlot_key=${__sandlot_item%%=*}
    # The first value is the one to restore, whatever the run repeats.
    if [[ $__sandlot_keys != *" $__sandlot_key "* ]]; then
      __sandlot_keys+="$__sandlot_key "
      if [[ -v $__sandlot_key ]]; then
        __sandlot_saved+=("$(builtin declare -p "$__sandlot_key")")
      else
        __sandlot_saved+=("builtin unset $__sandlot_key")
      fi
    fi
    builtin export "$__sandlot_item"
  done <"$__sandlot_dir/env"
  builtin cd -- "$__sandlot_where" || builtin exit 2
  __sandlot_abort=
  __sandlot_running=1
  builtin source "$__sandlot_dir/cell" <"$__sandlot_dir/stdin"
  __sandlot_status=$?
  __sandlot_running=
  if [[ -n $__sandlot_abort ]]; then
    builtin echo Interrupted >&2
    __sandlot_status=130
  fi
  for __sandlot_item in "${__sandlot_saved[@]}"; do
    builtin eval "$__sandlot_item"
  done
  # As a process's exit status would be.
  builtin printf '%d\n' "$((__sandlot_status & 255))" >&"$__sandlot_done"
done
