#!/usr/bin/env bash
# Builds every guest component (built-in language handlers, the out-of-tree example,
# the test fixtures) and copies them into guests/dist/ and host/core/builtin/, both
# committed: sandlot-core embeds host/core/builtin/*.wasm (inside its own package, so
# that it can be published), so building the host needs no WebAssembly toolchain.
#
#   guests/build.sh           build and update dist/
#   guests/build.sh --check   build and fail if dist/ differs from what was built
#
# rustup's toolchain has no wasm32 target here, so guests are built with Debian's
# rustc-web (Rust 1.96 with std sources); this script installs it when it is missing.
set -euo pipefail
cd "$(dirname "$0")"
guests=$(pwd)

check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

packages=(rustc-web cargo-web rust-web-src rust-web-llvm lld wasi-libc)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
done
if [ "${#missing[@]}" -ne 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "guests/build.sh: needs Debian packages: ${missing[*]}" >&2
    echo "  install them with: sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
  echo "guests/build.sh: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Debian's cargo and rustc, not rustup's, which come first on PATH. RUSTC_BOOTSTRAP
# allows -Zbuild-std (see .cargo/config.toml). Paths are remapped so the components do
# not depend on where the checkout lives: CI compares them byte for byte.
export PATH="/usr/bin:$PATH" RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1
export RUSTFLAGS="-C link-self-contained=no -L /usr/lib/wasm32-wasi \
--remap-path-prefix=$guests=/sandlot/guests \
--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo"
target_dir=${SANDLOT_GUESTS_TARGET_DIR:-$guests/target}
/usr/bin/cargo build --release --locked --quiet --target-dir "$target_dir"

built=$target_dir/wasm32-wasip2/release
declare -A outputs=(
  [sandlot_python]=../host/core/builtin/python
  [sandlot_javascript]=../host/core/builtin/javascript
  [sandlot_typescript]=../host/core/builtin/typescript
  [sandlot_java]=../host/core/builtin/java
  [sandlot_cpp]=../host/core/builtin/cpp
  [sandlot_go]=../host/core/builtin/go
  [sandlot_r]=../host/core/builtin/r
  [sandlot_ruby]=../host/core/builtin/ruby
  [sandlot_bash]=../host/core/builtin/bash
  [sandlot_example_lua]=dist/examples/lua
  [sandlot_example_perl]=dist/examples/perl
  [sandlot_fixture_trap]=dist/fixtures/trap
  [sandlot_fixture_spin]=dist/fixtures/spin
  [sandlot_fixture_hog]=dist/fixtures/hog
  [sandlot_fixture_malformed]=dist/fixtures/malformed
  [sandlot_fixture_badplan]=dist/fixtures/badplan
  [sandlot_fixture_other_world]=dist/fixtures/other-world
  [sandlot_fixture_future_api]=dist/fixtures/future-api
  [sandlot_fixture_tally_runtime]=dist/fixtures/tally-runtime
  [sandlot_fixture_tally_runtime_0_2]=dist/fixtures/tally-runtime-0-2
)

stale=()
for crate in "${!outputs[@]}"; do
  src="$built/$crate.wasm"
  dst="${outputs[$crate]}.wasm"
  if $check; then
    cmp -s "$src" "$dst" || stale+=("$dst")
  else
    mkdir -p "$(dirname "$dst")"
    cp "$src" "$dst"
  fi
done

if $check; then
  if [ "${#stale[@]}" -ne 0 ]; then
    echo "guests/build.sh --check: these committed components differ from their sources:" >&2
    printf '  %s\n' "${stale[@]}" >&2
    echo "run guests/build.sh and commit guests/dist/ and host/core/builtin/" >&2
    exit 1
  fi
  echo "guests: all ${#outputs[@]} committed components match their sources"
else
  echo "guests: built ${#outputs[@]} components into guests/dist/ and host/core/builtin/"
fi
