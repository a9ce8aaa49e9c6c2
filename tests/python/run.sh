#!/usr/bin/env bash
# Runs the Python package's tests (tests/python) against the native module the
# workspace build made, in a virtual environment of their own with pinned pytest.
#
#   tests/python/run.sh [TARGET_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${1:-${CARGO_TARGET_DIR:-target}}"
[ "$#" -gt 0 ] && shift
venv="${SANDLOT_PY_VENV:-/var/tmp/sandlot-ci/py-venv}"
if ! "$venv/bin/python" -c 'import pytest' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'pytest==8.3.4'
fi
# The package as a wheel would lay it out: python/sandlot with the module beside it.
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cp -r host/python/python/sandlot "$stage/"
cp "$target/debug/lib_native.so" "$stage/sandlot/_native.abi3.so"
PYTHONPATH="$stage" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python "$@"
