#!/usr/bin/env bash
# Runs every check and test of sandlot. Works on a fresh Debian 12 machine with the Rust
# toolchain: it installs what the checks need (as root) and skips nothing.
#
#   tests/run.sh
#
# 1. the committed guest components match their sources (guests/build.sh --check)
# 2. formatting
# 3. one build of the test binaries and of the `sandlot` binary the next steps use,
#    linted by clippy as it compiles (warnings as errors)
# 4. the local Kubernetes cluster runs (k8s-local/up.sh; on a fresh machine its binaries
#    build in the background from after step 1, 10-20 min)
# 5. Docker and Podman run, with sandlot's images built (tests/services.sh), in the
#    background while the wasm backend's Python and JavaScript runtimes and the fuzz
#    targets build; the images' root filesystems start building as soon as step 3
#    has linked the `sandlot` binary, before the test binaries
# 6. every test of the workspace: unit, end-to-end (tests/*.rs) and doc examples (the
#    native backend's with no container engine in reach, as root and as an ordinary
#    user: tests/native_user.sh), then the Python package's
#    (tests/python/run.sh: its wheel built with maturin, installed into a clean venv)
# 7. every fuzz target for a bounded time, after replaying the inputs it once crashed on
#    (beside the native and Python suites, at the lowest priority)
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it started, how long the run has taken so far and how busy the
# processors were since the step before (all processes of the machine, background work
# included), so a slow run (a cold one above all) can be broken down from its log, and
# idle time told from work.
started=$SECONDS
cpu_busy=0 cpu_total=0
step() {
  local _ user nice system idle iowait irq softirq steal busy total usage=""
  read -r _ user nice system idle iowait irq softirq steal _ </proc/stat
  busy=$((user + nice + system + irq + softirq + steal))
  total=$((busy + idle + iowait))
  if [ "$total" -gt "$cpu_total" ] && [ "$cpu_total" -gt 0 ]; then
    usage=", $((100 * (busy - cpu_busy) / (total - cpu_total)))% busy before"
  fi
  cpu_busy=$busy cpu_total=$total
  printf '\n==> [%s +%ds%s] %s\n' "$(date -u +%H:%M:%S)" "$((SECONDS - started))" "$usage" "$*"
}

# The end-to-end tests carry out plans for real with these toolchains.
need=()
for tool in python3 node npm javac java g++ bash mold; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if [ "${#need[@]}" -ne 0 ]; then
  step "installing toolchains the tests run: ${need[*]}"
  declare -A package=([python3]=python3 [node]=nodejs [npm]=npm [javac]=default-jdk-headless [java]=default-jdk-headless [g++]=g++ [bash]=bash [mold]=mold)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(for t in "${need[@]}"; do echo "${package[$t]}"; done | sort -u) >/dev/null
fi

# Every binary of the build is linked by mold: the `sandlot` binary, each suite of
# tests/, each crate's unit tests, every doc example (edition 2021 links one program
# per example), the fuzz targets and the Python module, most carrying wasmtime, and
# GNU ld took seconds for each. Set for the host's target only: the guest
# components link for wasm32 with rust-lld. Every cargo command of this run (the
# native, Python and fuzz steps too) inherits it, so they share one set of artifacts.
host_target="$(rustc -vV | sed -n 's/^host: //p')"
link_with_mold="-C link-arg=-fuse-ld=mold"
export "CARGO_TARGET_$(echo "$host_target" | tr 'a-z.-' 'A-Z__')_RUSTFLAGS=$link_with_mold"
export RUSTDOCFLAGS="$link_with_mold"

# The Python handler's plot capture is tested against real matplotlib.
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  step "installing matplotlib for the plot-capture test"
  python3 -m pip install --quiet --disable-pip-version-check matplotlib
fi

# The playground is checked in a real headless browser, Debian's chromium driven by
# Selenium (tests/playground_browser.py). Debian's packages first, in the foreground:
# one dpkg at a time.
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  step "installing chromium and its WebDriver for the playground test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi
if ! python3 -c 'import ensurepip' 2>/dev/null; then
  step "installing python3-venv for the clients' environments"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi

# Clients that no one here wrote, pinned from PyPI and npm, each in an environment or
# folder of its own:
# - the official Python MCP SDK (tests/mcp_client.py) and Selenium;
# - for code mode, upstream MCP servers: the reference time server (PyPI) and
#   server-everything (npm);
# - E2B's Python and JavaScript SDKs (tests/e2b_client.py, tests/e2b_client.mjs);
# - the OpenAI Agents SDK's E2B client (tests/e2b_agents.py), which pins an older
#   `e2b` of its own;
# - maturin, and the agent frameworks the Python package's tests use.
# Downloads, not builds: they go on in the background while the Rust build takes the
# processors, and the tests wait for them.
mcp_venv="${SANDLOT_MCP_VENV:-/var/tmp/sandlot-ci/mcp-venv}"
upstream_venv="${SANDLOT_MCP_UPSTREAM_VENV:-/var/tmp/sandlot-ci/mcp-upstream-venv}"
upstream_npm="${SANDLOT_MCP_UPSTREAM_NPM:-/var/tmp/sandlot-ci/mcp-npm}"
everything="$upstream_npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
e2b_venv="${SANDLOT_E2B_VENV:-/var/tmp/sandlot-ci/e2b-venv}"
e2b_npm="${SANDLOT_E2B_NPM:-/var/tmp/sandlot-ci/e2b-npm}"
agents_venv="${SANDLOT_AGENTS_VENV:-/var/tmp/sandlot-ci/agents-venv}"
export SANDLOT_TEST_MCP_PYTHON="$mcp_venv/bin/python"
export SANDLOT_TEST_MCP_TIME="$upstream_venv/bin/mcp-server-time"
export SANDLOT_TEST_MCP_EVERYTHING="$everything"
export SANDLOT_TEST_E2B_PYTHON="$e2b_venv/bin/python"
export SANDLOT_TEST_E2B_NPM="$e2b_npm"
export SANDLOT_TEST_AGENTS_PYTHON="$agents_venv/bin/python"
pip_into() {
  local venv=$1
  shift
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
}
clients() {
  if ! "$mcp_venv/bin/python" -c 'import mcp, selenium' 2>/dev/null; then
    step "installing the Python MCP SDK and Selenium"
    pip_into "$mcp_venv" 'mcp==2.3.0' 'selenium==4.27.1'
  fi
  if ! "$upstream_venv/bin/python" -c 'import mcp_server_time' 2>/dev/null; then
    step "installing mcp-server-time"
    pip_into "$upstream_venv" 'mcp-server-time==2026.10.19'
  fi
  if [ ! -f "$everything" ]; then
    step "installing @modelcontextprotocol/server-everything"
    mkdir -p "$upstream_npm"
    npm install --loglevel=error --no-audit --no-fund --prefix "$upstream_npm" '@modelcontextprotocol/server-everything@2026.8.31'
  fi
  if ! "$e2b_venv/bin/python" -c 'import e2b, e2b_code_interpreter' 2>/dev/null; then
    step "installing E2B's Python SDKs"
    pip_into "$e2b_venv" 'e2b==2.63.0' 'e2b-code-interpreter==2.11.5'
  fi
  if [ ! -f "$e2b_npm/node_modules/@e2b/code-interpreter/package.json" ]; then
    step "installing E2B's JavaScript SDKs"
    mkdir -p "$e2b_npm"
    npm install --loglevel=error --no-audit --no-fund --prefix "$e2b_npm" 'e2b@2.51.0' '@e2b/code-interpreter@2.8.0'
  fi
  if ! "$agents_venv/bin/python" -c 'import agents.extensions.sandbox.e2b' 2>/dev/null; then
    step "installing the OpenAI Agents SDK's E2B client"
    pip_into "$agents_venv" 'openai-agents[e2b]==0.24.0'
  fi
  step "the Python package's build and test venvs (tests/python/run.sh --prepare)"
  tests/python/run.sh --prepare
  step "client packages ready"
}
mkdir -p /var/log/sandlot
clients_log=/var/log/sandlot/clients.log
step "client packages, in the background (log: $clients_log)"
clients >"$clients_log" 2>&1 &
clients_job=$!
# Background work dies with this script, whatever stops it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

step "guest components match their sources"
guests/build.sh --check

k8s_local="${SANDLOT_K8S_LOCAL:-}"
if [ -z "$k8s_local" ]; then
  for dir in "$PWD/../shared/k8s-local" /work/shared/k8s-local; do
    if [ -x "$dir/up.sh" ]; then k8s_local="$dir"; break; fi
  done
fi
if [ -z "$k8s_local" ] || [ ! -x "$k8s_local/up.sh" ]; then
  echo "k8s-local not found: set SANDLOT_K8S_LOCAL to the folder holding up.sh" >&2
  exit 1
fi

# What the images' builds need (mmdebstrap, bubblewrap, Podman), installed now: they
# start during the Rust build below, and this is the last apt-get before the cluster's.
step "packages the images' builds need (tests/services.sh --install)"
tests/services.sh --install

# On a fresh machine the cluster's binaries take 10-20 minutes to build (Go, from
# Debian's source package). Started here, after the last apt-get of this script and
# before the long Rust builds, they build while those do and while downloads wait;
# up.sh below takes the same lock and finds them built.
k8s_build_log=/var/log/sandlot/k8s-local-build.log
"$k8s_local/build.sh" >"$k8s_build_log" 2>&1 &
k8s_build=$!

step "cargo fmt --check"
cargo fmt --all --check

# One build for everything after, in two steps that share every artifact: the
# `sandlot` binary (the end-to-end suites' own, with which the runtimes and images are
# installed), then the test binaries. Built by `cargo run` (`-p sandlot-cli`) instead,
# the binary's dependencies would be resolved for that package alone, and some 70
# crates (wasmtime, tokio, hyper, kube among them) compiled twice, with two sets of
# features: minutes on a fresh machine. `--workspace` resolves them as the test build
# does (tests/native_user.sh and the native step below ask for theirs the same way).
#
# Clippy lints the workspace's own crates inside this build, as their compiler
# (RUSTC_WORKSPACE_WRAPPER is how `cargo clippy` itself runs clippy-driver, and
# CLIPPY_ARGS how it passes `-- -D warnings`). A separate `cargo clippy` re-checks all
# ~300 dependencies in check mode: 10 minutes of a cold run. Exported, so every later
# build of the workspace (`cargo test`, the Python wheel) finds these same artifacts:
# cargo keys a workspace crate's artifacts by its wrapper.
clippy_driver="$(rustup which clippy-driver 2>/dev/null || command -v clippy-driver)"
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-Dwarnings__CLIPPY_HACKERY__"
sandlot_bin="${CARGO_TARGET_DIR:-target}/debug/sandlot"
step "the sandlot binary and the workspace's other binaries, linted by clippy"
cargo build --workspace --bins --locked

# The images' root filesystems need only the `sandlot` binary: they build during the
# rest of the Rust build (mmdebstrap, no engine needed: 10-15 minutes on a fresh
# machine, mostly dpkg), made and unpacked for the native backend in two lanes of
# about the same length; the engines import the same tarballs later
# (tests/services.sh), each waiting for one still being made.
rootfs_log=/var/log/sandlot/rootfs
step "root filesystems of the images, in the background (logs: $rootfs_log-*.log)"
rootfs_jobs=()
for lane in "python node cpp r" "polyglot jvm go ruby"; do
  # shellcheck disable=SC2086 # a lane is a list of recipes
  "$sandlot_bin" images build --engine native $lane >"$rootfs_log-${lane%% *}.log" 2>&1 &
  rootfs_jobs+=($!)
done

step "the test binaries, benches and examples, linted by clippy"
cargo test --workspace --all-targets --locked --no-run

# First: its up.sh starts the dockerd the kubelet needs (with the runc-clamp runtime)
# and refuses a dockerd something else started; services.sh then finds Docker answering.
step "the local Kubernetes cluster (k8s-local/up.sh: built once, then ~20 s to start)"
if ! wait "$k8s_build"; then
  cat "$k8s_build_log" >&2
  echo "building the Kubernetes binaries failed (log above: $k8s_build_log)" >&2
  exit 1
fi
k8s_env="$("$k8s_local/up.sh" --env)"
eval "$k8s_env"
export KUBECONFIG

# The engines start and import the root filesystems made above, each as it is ready
# (some 5 minutes on a fresh machine), in the background while the runtimes and the
# fuzz targets build.
step "container engines and images, in the background (log: /var/log/sandlot/services.log)"
services_log=/var/log/sandlot/services.log
tests/services.sh "$sandlot_bin" >"$services_log" 2>&1 &
services=$!

step "runtimes of the wasm backend (installed once, pinned by hash, compiled once)"
"$sandlot_bin" runtimes install python
"$sandlot_bin" runtimes install javascript

# sandlot with coverage instrumentation: its own artifacts, beside the plain ones
# every test binary is already linked against.
step "the fuzz targets"
host/fuzz/run.sh --build-only

step "waiting for the container engines and images"
for job in "${rootfs_jobs[@]}"; do
  if ! wait "$job"; then
    cat "$rootfs_log"-*.log >&2
    echo "building the root filesystems failed (logs above: $rootfs_log-*.log)" >&2
    exit 1
  fi
done
cat "$rootfs_log"-*.log
if ! wait "$services"; then
  cat "$services_log" >&2
  echo "starting the engines or building the images failed (log above: $services_log)" >&2
  exit 1
fi
cat "$services_log"

step "waiting for the client packages"
if ! wait "$clients_job"; then
  cat "$clients_log" >&2
  echo "installing the client packages failed (log above: $clients_log)" >&2
  exit 1
fi
cat "$clients_log"

# Everything a suite can need is up now: a test that finds a need missing fails here,
# where on a laptop it would pass without running (tests/support/needs.rs).
export SANDLOT_TEST_EXPECT_ALL=1

# The native backend's share of the suites (`native::…`) runs in the next step.
step "cargo test"
cargo test --workspace --locked -- --skip native::

# The fuzz targets (CPU-bound, one per processor) run beside the suites from here on,
# at the lowest priority: these suites' sandboxes mostly wait, and the fuzzers take
# only the time they leave idle (each runs its 20 s, with fewer inputs when the suites
# are busy), instead of 2 minutes of their own at the end.
fuzz_log=/var/log/sandlot/fuzz.log
step "fuzz targets, 20 s each, in the background at the lowest priority (log: $fuzz_log)"
nice -n 19 host/fuzz/run.sh 20 >"$fuzz_log" 2>&1 &
fuzz_job=$!

# The native backend needs no engine: its suites run with Docker and Podman out of
# reach (nothing is stopped; every way to an engine points nowhere).
step "the native backend's suites with no engine in reach"
DOCKER_HOST=unix:///nonexistent/docker.sock \
  CONTAINER_HOST=unix:///nonexistent/podman.sock \
  cargo test --workspace --locked --test containers --test conformance -- native::

# And as an ordinary user, with the cgroups root delegates to it, its share of the
# hostile corpus too.
step "the native backend's suites as an ordinary user (tests/native_user.sh)"
tests/native_user.sh "$sandlot_bin"

step "the Python package: its wheel, a clean venv, its tests (tests/python/run.sh)"
tests/python/run.sh

step "waiting for the fuzz targets"
if ! wait "$fuzz_job"; then
  cat "$fuzz_log" >&2
  echo "a fuzz target failed (log above: $fuzz_log)" >&2
  exit 1
fi
cat "$fuzz_log"

step "all checks passed"
