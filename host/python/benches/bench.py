"""Benchmarks of the sandlot Python package: medians of wall-clock times, one run.

    python bench.py [--llm-sandbox-python PYTHON] [--image IMAGE]
                    [--llm-sandbox-image IMAGE] [--rust-median-us N]

- a run of ``print(1)`` in an open wasm session (the Python call's own cost over the
  Rust API's: compare with ``--rust-median-us``, the median of the Rust bench
  ``wasm/python (wasm)/run print 1 in an open session`` from the same machine and run);
- open + run + close on wasm, and on pooled Docker;
- ``sandlot.llm_sandbox.SandboxSession(lang="python")`` open + run + close on Docker,
  against llm-sandbox 0.3.46 itself (``--llm-sandbox-python``: an interpreter with
  ``llm-sandbox[docker]==0.3.46`` installed) in the same run: sandlot in ``--image``,
  llm-sandbox in ``--llm-sandbox-image`` (the same image with what llm-sandbox needs
  added; ``--image`` if not given).

Prints a Markdown table. ``host/python/benches/run.sh`` sets everything up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import sandlot
from sandlot.llm_sandbox import SandboxSession

LLM_SANDBOX = """
import json, sys, time
from llm_sandbox import SandboxSession
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    with SandboxSession(lang="python", image=sys.argv[1]) as session:
        out = session.run("print(1)")
    times.append(time.perf_counter() - start)
    assert out.stdout.strip().endswith("1"), out
print(json.dumps(times))
"""


def median_of(action: Callable[[], object], rounds: int, warmup: int = 1) -> tuple[float, int]:
    for _ in range(warmup):
        action()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), rounds


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} µs"


def main() -> None:
    args = argparse.ArgumentParser()
    args.add_argument("--llm-sandbox-python")
    args.add_argument("--image", default="sandlot/python:latest")
    args.add_argument("--llm-sandbox-image", help="IMAGE with a default command, which llm-sandbox needs")
    args.add_argument("--rust-median-us", type=float)
    args.add_argument("--rounds", type=int, default=5, help="rounds of the Docker open + run + close rows")
    opts = args.parse_args()
    rows: list[tuple[str, float, int, str]] = []

    host = sandlot.Sandlot()
    with host.session("python", backend="wasm") as session:
        t, n = median_of(lambda: session.run("print(1)"), 2000, warmup=50)
    note = ""
    if opts.rust_median_us:
        note = f"{t / (opts.rust_median_us * 1e-6):.2f}× the Rust API's {opts.rust_median_us:.0f} µs"
    rows.append(("wasm: run `print(1)` in an open session", t, n, note))

    def wasm_open_run_close() -> None:
        with host.session("python", backend="wasm") as s:
            s.run("print(1)")

    t, n = median_of(wasm_open_run_close, 100, warmup=3)
    rows.append(("wasm: open + `print(1)` + close", t, n, ""))

    with sandlot.Sandlot(pools={"docker": {"min_idle": 2, "max_size": 4}}) as pooled:

        def pooled_open_run_close() -> None:
            with pooled.session("python", backend="docker") as s:
                s.run("print(1)")

        pooled_open_run_close()
        while pooled.pool_stats("docker")["idle"] < 2:
            time.sleep(0.1)
        # One session at a time, with a pause that lets the pool warm the next sandbox.
        times = []
        for _ in range(30):
            while pooled.pool_stats("docker")["idle"] < 1:
                time.sleep(0.05)
            start = time.perf_counter()
            pooled_open_run_close()
            times.append(time.perf_counter() - start)
        rows.append(("pooled Docker: open + `print(1)` + close", statistics.median(times), len(times), ""))

    def compat_open_run_close() -> None:
        with SandboxSession(lang="python", image=opts.image) as s:
            assert s.run("print(1)").stdout == "1\n"

    ours, n = median_of(compat_open_run_close, opts.rounds)
    rows.append(("`sandlot.llm_sandbox.SandboxSession(lang=\"python\")` open + run + close, Docker", ours, n, ""))

    if opts.llm_sandbox_python:
        done = subprocess.run(
            [opts.llm_sandbox_python, "-c", LLM_SANDBOX, opts.llm_sandbox_image or opts.image, str(max(1, opts.rounds // 2 + 1))],
            capture_output=True, text=True,
        )
        if done.returncode != 0:
            sys.exit(f"llm-sandbox failed:\n{done.stderr}")
        theirs_all = json.loads(done.stdout.strip().splitlines()[-1])
        theirs = statistics.median(theirs_all)
        rows.append((
            "llm-sandbox 0.3.46 `SandboxSession(lang=\"python\")` open + run + close, Docker",
            theirs, len(theirs_all), f"sandlot.llm_sandbox is {theirs / ours:.0f}× faster",
        ))

    print("| benchmark | median | runs | |")
    print("| --- | --- | --- | --- |")
    for name, t, n, note in rows:
        print(f"| {name} | {fmt(t)} | {n} | {note} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
