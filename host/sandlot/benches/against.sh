#!/usr/bin/env bash
# Times this checkout against an earlier commit in one run, as ratios of medians.
#
#   host/sandlot/benches/against.sh REV BENCH [PAIRS] [-- CRITERION ARGS...]
#
# REV is built in a worktree beside this one (same target dir, so dependencies are
# shared), both bench binaries are built in release first, then they run in turn,
# PAIRS times (default 5), old first in odd pairs and new first in even ones (the
# first run of a pair can find the engine still removing the last one's containers).
# Alternating pairs on one machine in one session is what makes a ratio meaningful on
# a shared, noisy host: each pair sees the same load. The CRITERION ARGS (a filter,
# say) go to both binaries.
#
# Prints, per benchmark id, the median of each side over the pairs, the new/old ratio
# of those medians and the range of the per-pair ratios. Commits from before the crate
# split (no host/sandlot/benches) are built as the single `sandlot` package of that
# time. Example, the Docker cold and warm figures against the commit before the split:
#
#   host/sandlot/benches/against.sh 3f590eb containers 3 -- \
#       'python \(docker\)/(cold open|warm print 1 in the kernel)'
set -euo pipefail

usage() {
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
rev=$1 bench=$2
shift 2
pairs=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  pairs=$1
  shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
case $pairs in '' | *[!0-9]*) echo "PAIRS must be a number, not '$pairs'" >&2; exit 2 ;; esac

here=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
old_sha=$(git -C "$here" rev-parse --verify --quiet "$rev^{commit}") || {
  echo "no commit '$rev' in $here" >&2
  exit 2
}
work=${SANDLOT_AGAINST_DIR:-/var/tmp/sandlot-against}
old_tree=$work/${old_sha:0:12}
if [ ! -d "$old_tree" ]; then
  mkdir -p "$work"
  git -C "$here" worktree add --detach "$old_tree" "$old_sha" >/dev/null
fi

# Builds the bench binary of the checkout in $1 and prints its path.
build() {
  local tree=$1 args
  if [ -d "$tree/host/sandlot/benches" ]; then
    args=(-p sandlot --features full)
  else
    args=()
  fi
  (cd "$tree" && cargo bench --locked --no-run --message-format=json-render-diagnostics "${args[@]}" --bench "$bench") |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and "bench" in m["target"]["kind"]:
        print(m["executable"])
'
}
echo "==> building $bench at ${old_sha:0:12} (old) and at the working tree (new)" >&2
old_bin=$(build "$old_tree")
new_bin=$(build "$here")
[ -n "$old_bin" ] && [ -n "$new_bin" ] || {
  echo "cargo built no bench binary named '$bench'" >&2
  exit 1
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for pair in $(seq 1 "$pairs"); do
  order="old new"
  [ $((pair % 2)) -eq 0 ] && order="new old"
  for side in $order; do
    bin=$old_bin dir=$old_tree/host
    [ -d "$old_tree/host/sandlot/benches" ] && dir=$old_tree/host/sandlot
    [ $side = new ] && bin=$new_bin dir=$here/host/sandlot
    echo "==> pair $pair/$pairs: $side" >&2
    # Each side keeps its own criterion history, so neither reports a "change"
    # against the other.
    (cd "$dir" && CRITERION_HOME="$out/criterion-$side" "$bin" --bench --noplot "$@") \
      >"$out/$side-$pair.log" 2>&1 || {
      echo "the $side bench failed; its output:" >&2
      tail -40 "$out/$side-$pair.log" >&2
      exit 1
    }
  done
done

python3 - "$out" "$pairs" "$old_sha" <<'EOF'
import re, statistics, sys
out, pairs, sha = sys.argv[1], int(sys.argv[2]), sys.argv[3][:12]
unit = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6, "s": 1e9}
def medians(path):
    found, name = {}, None
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        t = re.search(r"time:\s*\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if t:
            before = line[: line.index("time:")].strip()
            name = before or name
            if name:
                found[name] = float(t.group(1)) * unit[t.group(2)]
            name = None
        elif line and not line[0].isspace() and not line.startswith(("Benchmarking", "Found ", "Warning", "Gnuplot")):
            name = line.strip()
    return found
def show(ns):
    for u, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= f:
            return f"{ns / f:.4g} {u}"
    return f"{ns:.4g} ns"
runs = {s: [medians(f"{out}/{s}-{p}.log") for p in range(1, pairs + 1)] for s in ("old", "new")}
names = [n for n in runs["new"][0] if all(n in r for r in runs["old"] + runs["new"])]
if not names:
    sys.exit("no benchmark ran on both sides: check the filter")
print(f"| benchmark | old ({sha}) | new | new/old | per-pair ratios |")
print("| --- | --- | --- | --- | --- |")
for n in names:
    old = [r[n] for r in runs["old"]]
    new = [r[n] for r in runs["new"]]
    each = [b / a for a, b in zip(old, new)]
    print(f"| {n} | {show(statistics.median(old))} | {show(statistics.median(new))} | "
          f"{statistics.median(new) / statistics.median(old):.2f} | "
          f"{min(each):.2f}–{max(each):.2f} |")
# Lines the benches print themselves (throughput, memory): shown side by side.
for s in ("old", "new"):
    for line in open(f"{out}/{s}-{pairs}.log", encoding="utf-8", errors="replace"):
        if re.search(r"runs/s|KiB", line):
            print(f"{s}, pair {pairs}: {line.strip()}")
EOF
