#!/usr/bin/env bash
# Makes the container engines the end-to-end tests use ready, on a fresh Debian 12
# machine or one where they already run (then it takes a second):
#
#   tests/services.sh [SANDLOT_BINARY]
#
# 1. installs docker.io, podman and mmdebstrap if missing;
# 2. starts dockerd, and Podman's Docker-compatible API on /run/podman/podman.sock with
#    tests/containers.conf, unless they answer already (there is no systemd here);
# 3. builds the sandlot images into both engines with `sandlot images build` (from
#    this machine's Debian sources; images already up to date are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
sandlot="${1:-target/debug/sandlot}"
logs=/var/log/sandlot
mkdir -p "$logs"

step() { printf '\n==> %s\n' "$*"; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v podman >/dev/null || need+=(podman)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v curl >/dev/null || need+=(curl)
if [ "${#need[@]}" -ne 0 ]; then
  step "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

answers() { curl -sf --max-time 5 --unix-socket "$1" http://engine/_ping >/dev/null 2>&1; }
wait_for() {
  for _ in $(seq 1 120); do answers "$1" && return 0; sleep 0.5; done
  echo "$2 did not start; see $3" >&2
  tail -20 "$3" >&2 || true
  return 1
}

if ! answers /var/run/docker.sock; then
  step "starting dockerd (log: $logs/dockerd.log)"
  (cd / && nohup dockerd >"$logs/dockerd.log" 2>&1 &)
  wait_for /var/run/docker.sock dockerd "$logs/dockerd.log"
fi

if ! answers /run/podman/podman.sock; then
  step "starting Podman's API (log: $logs/podman.log)"
  mkdir -p /run/podman /etc/sandlot
  # The service outlives this checkout: its settings and working directory must not
  # live in it (conmon fails every container start once its cwd is deleted).
  cp tests/containers.conf /etc/sandlot/containers.conf
  (cd / && CONTAINERS_CONF=/etc/sandlot/containers.conf \
    nohup podman system service --time=0 unix:///run/podman/podman.sock >"$logs/podman.log" 2>&1 &)
  wait_for /run/podman/podman.sock "podman system service" "$logs/podman.log"
fi

step "container images (built once from this machine's Debian sources)"
"$sandlot" images build --engine docker
"$sandlot" images build --engine podman
