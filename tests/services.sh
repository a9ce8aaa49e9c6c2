#!/usr/bin/env bash
# Makes the container engines and the native backend the end-to-end tests use ready,
# on a fresh Debian 12 machine or one where they already run (then it takes a second):
#
#   tests/services.sh [SANDLOT_BINARY]
#   tests/services.sh --install        (step 1 only: what the images' builds need)
#
# 1. installs docker.io, podman, mmdebstrap and bubblewrap if missing;
# 2. starts dockerd, and Podman's Docker-compatible API on /run/podman/podman.sock with
#    tests/containers.conf, unless they answer already (there is no systemd here);
# 3. puts a TLS proxy (stunnel) on 127.0.0.1:2376 in front of Docker's socket, with a
#    test CA and client certificate in /var/lib/sandlot-tests/docker-tls, so the tests
#    reach Docker as they would an engine on another machine (DOCKER_HOST=tcp://…,
#    DOCKER_TLS_VERIFY, DOCKER_CERT_PATH);
# 4. builds the sandlot images into both engines, side by side, with `sandlot images
#    build` (from this machine's Debian sources; images already up to date are
#    skipped), and unpacks the same root filesystems for the native backend.
set -euo pipefail
cd "$(dirname "$0")/.."
install_only=false
if [ "${1:-}" = "--install" ]; then
  install_only=true
  shift
fi
sandlot="${1:-target/debug/sandlot}"
logs=/var/log/sandlot
mkdir -p "$logs"

# Timed as tests/run.sh's steps are: the images are a long pole of a cold run.
started=$SECONDS
step() { printf '\n==> [%s +%ds] %s\n' "$(date -u +%H:%M:%S)" "$((SECONDS - started))" "$*"; }

need=()
# Not with --install: that runs before k8s-local's up.sh, which installs Docker itself
# and must be the one to start it.
$install_only || command -v dockerd >/dev/null || need+=(docker.io)
command -v podman >/dev/null || need+=(podman)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v curl >/dev/null || need+=(curl)
command -v stunnel4 >/dev/null || need+=(stunnel4)
command -v openssl >/dev/null || need+=(openssl)
if [ "${#need[@]}" -ne 0 ]; then
  step "installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if $install_only; then
  exit 0
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

tls=/var/lib/sandlot-tests/docker-tls
tls_answers() {
  curl -sf --max-time 5 --cacert "$tls/client/ca.pem" --cert "$tls/client/cert.pem" \
    --key "$tls/client/key.pem" https://127.0.0.1:2376/_ping >/dev/null 2>&1
}
if [ ! -f "$tls/client/key.pem" ]; then
  step "making a test CA and certificates for Docker over TLS ($tls)"
  mkdir -p "$tls/client"
  (
    cd "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=sandlot test CA" \
      -keyout ca-key.pem -out ca.pem 2>/dev/null
    sign() { # name subject extensions
      openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$1-key.pem" -out "$1.csr" 2>/dev/null
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -days 3650 -in "$1.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -extfile "$1.ext" -out "$1.pem" 2>/dev/null
    }
    sign server "/CN=localhost" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
    sign client "/CN=sandlot tests" "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
    cp ca.pem client/ca.pem
    cp client.pem client/cert.pem
    cp client-key.pem client/key.pem
    chmod 600 ./*-key.pem client/key.pem
  )
fi
if ! tls_answers; then
  step "starting a TLS proxy to Docker on 127.0.0.1:2376 (log: $logs/docker-tls.log)"
  # stunnel rather than socat: socat cannot resume a TLS session with a client
  # certificate ("session id context uninitialized"), and clients do resume.
  cat >"$tls/stunnel.conf" <<CONF
foreground = no
pid = $tls/stunnel.pid
output = $logs/docker-tls.log
[docker]
accept = 127.0.0.1:2376
connect = /var/run/docker.sock
cert = $tls/server.pem
key = $tls/server-key.pem
CAfile = $tls/ca.pem
requireCert = yes
verifyChain = yes
CONF
  (cd / && stunnel4 "$tls/stunnel.conf")
  for _ in $(seq 1 40); do tls_answers && break; sleep 0.25; done
  tls_answers || { echo "the TLS proxy did not start; see $logs/docker-tls.log" >&2; exit 1; }
fi

# Both engines import the same root filesystems, each as it is ready (the builds in
# tests/run.sh may still be making some): side by side, so that Podman's imports, mostly
# disk, go on while the rest are made instead of after.
step "container images for Docker and Podman, side by side (built once from this machine's Debian sources)"
"$sandlot" images build --engine podman >"$logs/images-podman.log" 2>&1 &
podman_images=$!
if ! "$sandlot" images build --engine docker; then
  kill "$podman_images" 2>/dev/null || true
  exit 1
fi
step "waiting for Podman's images"
if ! wait "$podman_images"; then
  cat "$logs/images-podman.log" >&2
  echo "building the images for Podman failed (log above: $logs/images-podman.log)" >&2
  exit 1
fi
cat "$logs/images-podman.log"
# Podman 4.3's Docker-compatible API leaves a copy of every image loaded through it in
# its temporary directory (api_load.tar*, about 4 GB for a full build): they filled
# this machine's disk after three cold builds.
find /var/tmp "${TMPDIR:-/tmp}" -maxdepth 1 -type f -name 'api_load.tar*' -delete 2>/dev/null || true

step "the same root filesystems, unpacked for the native backend"
"$sandlot" images build --engine native

step "engines up, images built"
