#!/usr/bin/env bash
# Runs the native backend's suites as an ordinary user, as root sets one up: tests/run.sh
# calls it after `cargo test`, with the test binaries built and the root filesystems
# unpacked (as root, into /var/lib/sandlot/native, which the user reads).
#
#   tests/native_user.sh SANDLOT_BINARY
#
# 1. makes the user `sandlot-test` if there is none;
# 2. as that user, with no cgroup delegated yet: `sandlot doctor` must say what root
#    has to run, and a sandbox's processes and each process's memory must still stop
#    at their limits (RLIMIT_NPROC, RLIMIT_DATA);
# 3. delegates it a cgroup per controller sandlot limits by (cgroup v1: a directory
#    root makes and gives the user, under this process's own cgroups, which the user's
#    processes inherit), as `sandlot doctor` says;
# 4. runs, as that user, with no container engine in reach: the native share of the
#    container and conformance suites (`native::…`) and of the hostile corpus.
set -euo pipefail
sandlot="$(realpath "${1:?usage: tests/native_user.sh SANDLOT_BINARY}")"
cd "$(dirname "$0")/.."
user=sandlot-test
id -u "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
uid="$(id -u "$user")"

# The mount point of the v1 hierarchy holding controller $1, and this process's
# cgroup in it: what the backend reads from /proc/self/mountinfo and /proc/self/cgroup.
mount_of() {
  awk -v c="$1" '{
    for (i = 1; i <= NF; i++) if ($i == "-") {
      if ($(i + 1) == "cgroup" && ("," $(i + 3) ",") ~ ("," c ",")) print $5
      break
    }
  }' /proc/self/mountinfo | head -1
}
own_of() { awk -F: -v c="$1" '("," $2 ",") ~ ("," c ",") { print $3 }' /proc/self/cgroup; }
# Removes cgroup $1 and every cgroup in it, deepest first. A run stopped before its end
# leaves the delegation behind with its sandboxes' cgroups in it (and perhaps their
# processes): a cgroup with children or processes cannot be removed.
remove_cgroup_tree() {
  [ -d "$1" ] || return 0
  local tries=0
  while ! find "$1" -depth -type d -exec rmdir {} + 2>/dev/null; do
    find "$1" -name cgroup.procs -exec cat {} + | xargs -r kill -9 2>/dev/null || true
    tries=$((tries + 1))
    if [ "$tries" -gt 50 ]; then
      echo "cannot remove the cgroup $1 (processes in it: $(find "$1" -name cgroup.procs -exec cat {} + | tr '\n' ' '))" >&2
      return 1
    fi
    sleep 0.1
  done
}
# Where the backend looks for the cgroups delegated to the user; none is there yet (a
# run stopped before its end may have left them).
delegated=()
for controller in memory pids cpu; do
  mount="$(mount_of "$controller")"
  if [ -z "$mount" ]; then
    echo "no cgroup v1 $controller hierarchy is mounted: the native backend's limits need one" >&2
    exit 1
  fi
  dir="$mount$(own_of "$controller" | sed 's:/$::')/sandlot-$uid"
  remove_cgroup_tree "$dir"
  delegated+=("$dir")
done

# The binaries `cargo test` built (cargo itself is not the user's to run).
# The workspace's: with `-p`, cargo would resolve other features and build again.
tests="$(cargo test --workspace --locked --no-run --message-format=json \
  --test containers --test conformance --test hostile 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])')"
binary() { awk -v t="$1" '$1 == t { print $2 }' <<<"$tests"; }

as_user() {
  # Run where cargo runs an integration test: its package's directory.
  (cd host/cli && runuser -u "$user" -- env -i PATH="/usr/local/bin:/usr/bin:/bin" \
    HOME="$(getent passwd "$user" | cut -d: -f6)" RUST_BACKTRACE=1 \
    SANDLOT_NATIVE_DIR="${SANDLOT_NATIVE_DIR:-/var/lib/sandlot/native}" \
    SANDLOT_TEST_EXPECT_ALL=1 DOCKER_HOST=unix:///nonexistent/docker.sock \
    CONTAINER_HOST=unix:///nonexistent/podman.sock "$@")
}

echo "==> as $user (uid $uid), no cgroup delegated"
doctor="$(as_user "$sandlot" doctor 2>&1 || true)"
if ! grep -q "no cgroup is delegated to uid $uid (as root: \`mkdir -p" <<<"$doctor"; then
  echo "$doctor"
  echo "sandlot doctor, run by a user without a delegated cgroup, did not say how to delegate one" >&2
  exit 1
fi
as_user "$(binary containers)" native::processes_stop_at_the_limit \
  native::memory_is_capped_per_process_without_cgroups

for dir in "${delegated[@]}"; do
  mkdir -p "$dir"
  # The directory alone: the kernel gives the user what it makes inside, while the
  # limits of the directory itself stay root's.
  chown "$uid" "$dir"
done
# Empty once the suites closed their sandboxes; a cgroup with children would keep the
# one this script runs in from being removed.
trap 'for dir in "${delegated[@]}"; do remove_cgroup_tree "$dir" || true; done' EXIT

echo "==> as $user (uid $uid), cgroups delegated: ${delegated[*]}"
as_user "$(binary containers)" native::
as_user "$(binary conformance)" native::
as_user env SANDLOT_HOSTILE_BACKENDS=native "$(binary hostile)"
