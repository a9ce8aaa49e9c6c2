#!/usr/bin/env bash
# Builds the Python package's wheel the way `pip install host/python` does (maturin,
# pinned) and tests it:
#
# 1. the wheel, in the dev profile and the target directory the workspace's tests use:
#    host/python/Cargo.toml unifies features with the workspace, so only the facade,
#    pyo3 and the module compile (seconds), not a second copy of the host;
# 2. a clean venv with nothing but the wheel runs the README's one-liner;
# 3. pytest (pinned) runs tests/python against the same wheel, installed into the
#    test venv.
#
#   tests/python/run.sh [PYTEST ARGS...]
#   tests/python/run.sh --prepare     (the two venvs only: downloads, no build, no test;
#                                      tests/run.sh does this while the Rust build runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
root="${SANDLOT_PY_ROOT:-/var/tmp/sandlot-ci}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
pip=(pip install --quiet --disable-pip-version-check)

# The venv with maturin, and the one the tests run in: pytest, the agent frameworks the
# integrations are tested with, and docker-py for the llm-sandbox examples that pass a
# client; pinned, so a release on PyPI cannot change what CI tests.
build="$root/py-build"
venv="${SANDLOT_PY_VENV:-$root/py-venv}"
test_deps=(pytest==8.3.4 openai-agents==0.24.0 langchain-core==1.5.6 langchain-protocol==0.0.20
  pydantic-ai-slim==2.68.0 docker==7.1.0)
if ! "$build/bin/maturin" --version 2>/dev/null | grep -qx 'maturin 1.16.0'; then
  python3 -m venv "$build"
  "$build/bin/python" -m "${pip[@]}" 'maturin==1.16.0'
fi
if [ "$(cat "$venv/.sandlot-deps" 2>/dev/null)" != "${test_deps[*]}" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m "${pip[@]}" "${test_deps[@]}"
  echo "${test_deps[*]}" >"$venv/.sandlot-deps"
fi
if [ "${1:-}" = "--prepare" ]; then
  exit 0
fi

wheels="$(mktemp -d)"
clean="$(mktemp -d)"
trap 'rm -rf "$wheels" "$clean"' EXIT
# Not isolated: the build venv's pinned maturin, not whatever PyPI has today.
PATH="$build/bin:$PATH" MATURIN_PEP517_ARGS="--profile dev --locked" \
  "$build/bin/python" -m pip wheel --quiet --disable-pip-version-check \
  --no-build-isolation --no-deps --wheel-dir "$wheels" host/python
wheel="$(ls "$wheels"/sandlot-*.whl)"
echo "built $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

python3 -m venv "$clean/venv"
"$clean/venv/bin/python" -m "${pip[@]}" "$wheel"
answer="$(cd "$clean" && venv/bin/python -c \
  "import sandlot; print(sandlot.Sandlot().session('python').run('print(6*7)').stdout)")"
if [ "$answer" != "42" ]; then
  echo "the one-liner in a clean venv printed '$answer', not 42" >&2
  exit 1
fi
echo "a clean venv with only the wheel: the one-liner printed 42"

"$venv/bin/python" -m "${pip[@]}" --force-reinstall --no-deps "$wheel"
# From the clean venv's folder, so `import sandlot` cannot find host/python/python.
cd "$clean" && "$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$OLDPWD" "$OLDPWD/tests/python" "$@"
