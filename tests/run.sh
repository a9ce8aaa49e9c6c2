#!/usr/bin/env bash
# Runs every check and test of sandlot. Works on a fresh Debian 12 machine with the Rust
# toolchain: it installs what the checks need (as root) and skips nothing.
#
#   tests/run.sh
#
# 1. the committed guest components match their sources (guests/build.sh --check)
# 2. formatting and clippy, warnings as errors
# 3. the wasm backend's Python and JavaScript runtimes are installed
# 4. Docker and Podman run, with sandlot's images built (tests/services.sh)
# 5. every test of the workspace: unit, end-to-end (tests/*.rs) and doc examples
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The end-to-end tests carry out plans for real with these toolchains.
need=()
for tool in python3 node npm javac java g++ bash; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if [ "${#need[@]}" -ne 0 ]; then
  step "installing toolchains the tests run: ${need[*]}"
  declare -A package=([python3]=python3 [node]=nodejs [npm]=npm [javac]=default-jdk-headless [java]=default-jdk-headless [g++]=g++ [bash]=bash)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(for t in "${need[@]}"; do echo "${package[$t]}"; done | sort -u) >/dev/null
fi

# The Python handler's plot capture is tested against real matplotlib.
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  step "installing matplotlib for the plot-capture test"
  python3 -m pip install --quiet --disable-pip-version-check matplotlib
fi

step "guest components match their sources"
guests/build.sh --check

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "runtimes of the wasm backend (installed once, pinned by hash, compiled once)"
cargo run --quiet --locked -- runtimes install python
cargo run --quiet --locked -- runtimes install javascript

step "container engines and images"
tests/services.sh "${CARGO_TARGET_DIR:-target}/debug/sandlot"

step "cargo test"
cargo test --workspace --locked
