#!/usr/bin/env bash
# Runs every fuzz target of sandlot for a bounded time (coverage-guided, libFuzzer):
#
#   host/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default 20 s, every target)
#   host/fuzz/run.sh --build-only                         (builds the targets, runs none)
#
# First each target replays its kept inputs (host/fuzz/regressions/TARGET/: crashes
# found once, fixed, and kept), then fuzzes from its seeds (host/fuzz/seeds/TARGET/)
# and the corpus earlier runs grew (in $SANDLOT_FUZZ_DIR, default
# /var/tmp/sandlot-fuzz). Targets run one per processor; a crash fails the run, its input left in
# $SANDLOT_FUZZ_DIR/crashes/TARGET/; fix the bug, then copy the input into
# host/fuzz/regressions/TARGET/ so it is replayed ever after.
set -euo pipefail
cd "$(dirname "$0")"
build_only=false
if [ "${1:-}" = "--build-only" ]; then
  build_only=true
  shift
fi
seconds="${1:-20}"
shift || true
work="${SANDLOT_FUZZ_DIR:-/var/tmp/sandlot-fuzz}"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=($(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^sandlot-fuzz$'))
fi

# The targets share the workspace's compiled dependencies only while they resolve each
# with the features the test build gave it (Cargo.toml says how): a drift cost a cold
# CI run 15 minutes, building wasmtime and 380 other crates a second time.
tree() { cargo tree --quiet --locked -f '{p} {f}' --prefix none "$@" | LC_ALL=C sort -u; }
drift="$(LC_ALL=C comm -13 <(tree --workspace -e normal,build,dev) \
  <(tree -p sandlot-fuzz -e normal,build) | grep -v '^sandlot' || true)"
if [ -n "$drift" ]; then
  echo "fuzz: these dependencies resolve with other features than in the workspace's" >&2
  echo "test build, so the fuzz build would compile them again:" >&2
  echo "$drift" | sed 's/^/  /' >&2
  echo "add each to host/fuzz/Cargo.toml's [dependencies] with the workspace's features" >&2
  echo "(cargo tree --workspace -e normal,build,dev -f '{p} {f}' -i CRATE shows them)" >&2
  exit 1
fi
RUSTC_WORKSPACE_WRAPPER="$PWD/sancov-rustc" cargo build --quiet --locked -p sandlot-fuzz --bins
if $build_only; then
  exit 0
fi
export bin="${CARGO_TARGET_DIR:-../../target}/debug" work seconds
# One target per processor at a time: each is a single-threaded libFuzzer.
fuzz_one() {
  local target=$1
  mkdir -p "$work/corpus/$target" "$work/crashes/$target"
  if compgen -G "regressions/$target/*" >/dev/null; then
    "$bin/$target" -runs=1 regressions/"$target"/* 2>"$work/$target.replay.log" || {
      tail -30 "$work/$target.replay.log"
      echo "fuzz: $target fails on a kept regression input" >&2
      return 1
    }
  fi
  local seeds=()
  [ -d "seeds/$target" ] && seeds=("seeds/$target")
  if ! "$bin/$target" -max_total_time="$seconds" -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/crashes/$target/" \
      "$work/corpus/$target" "${seeds[@]}" >"$work/$target.log" 2>&1; then
    tail -40 "$work/$target.log"
    echo "fuzz: $target crashed; the input is in $work/crashes/$target/" >&2
    return 1
  fi
  local runs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$target.log")
  echo "fuzz: $target: ${runs:-?} inputs in ${seconds} s, no crash"
}
export -f fuzz_one
if ! printf '%s\n' "${targets[@]}" | xargs -P "$(nproc)" -I{} bash -c 'fuzz_one "$1"' _ {}; then
  echo "fuzz: a target failed (above)" >&2
  exit 1
fi
