#!/usr/bin/env bash
# The Python package's benchmarks, in one run on this machine (medians):
#
#   host/python/benches/run.sh
#
# Needs what tests/run.sh leaves: the wheel installed in the test venv, the wasm
# runtimes, Docker with sandlot's images. Builds the Rust wasm bench in the dev profile,
# the wheel's own (so the Python/Rust ratio compares like with like), runs it for the
# Rust figure, installs llm-sandbox 0.3.46 from PyPI into a venv of its own, then runs
# bench.py.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root="${SANDLOT_PY_ROOT:-/var/tmp/sandlot-ci}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
python="${SANDLOT_PY_VENV:-$root/py-venv}/bin/python"
"$python" -c 'import sandlot' || { echo "run tests/python/run.sh first: it installs the wheel" >&2; exit 1; }

theirs="$root/llm-sandbox-venv"
if ! "$theirs/bin/python" -c 'import llm_sandbox, docker' 2>/dev/null; then
  python3 -m venv "$theirs"
  "$theirs/bin/python" -m pip install --quiet --disable-pip-version-check 'llm-sandbox[docker]==0.3.46'
fi

# llm-sandbox needs what its own images have and sandlot's do not: a default command
# (sandlot starts its own agent), `python` and the venv module (it makes a venv and
# upgrades pip in it when a session opens). The same image, with those from Debian.
theirs_image=sandlot-bench/llm-sandbox-python:latest
printf '%s\n' 'FROM sandlot/python:latest' \
  'RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-pip python-is-python3 >/dev/null && rm -rf /var/lib/apt/lists/*' \
  'CMD ["/bin/bash"]' | docker build -q -t "$theirs_image" - >/dev/null

cargo bench --workspace --locked --profile dev --bench wasm -- 'python \(wasm\)/run print 1' >&2
estimates="$CARGO_TARGET_DIR/criterion/python (wasm)/run print 1 in an open session/new/estimates.json"
rust_us="$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["median"]["point_estimate"] / 1000)' "$estimates")"

"$python" host/python/benches/bench.py --llm-sandbox-python "$theirs/bin/python" --rust-median-us "$rust_us" \
  --llm-sandbox-image "$theirs_image" "$@"
