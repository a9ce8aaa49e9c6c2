"""host/python/examples: each runs to its end, on Docker (their default) and, where it
does not need a container, on wasm."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "host" / "python" / "examples"
# What each example prints when it works.
EXPECTED = {
    "quick_start.py": ["Hello from sandlot!", "Hello from LLM Sandbox!", "Mean: 3.0"],
    "files.py": ["ran test.py", "saved", "copied back: hello from test.py"],
    "plots.py": ["image/png", "Generated 1 plots"],
    "interactive.py": ["Result: 42", "A"],
    "pools.py": ["'Task 7'", "Total containers:"],
    "agent_tool.py": ["exit_code: 0", "3.8333"],
}
ON_WASM = ["quick_start.py", "files.py", "plots.py", "interactive.py", "agent_tool.py"]


def run(example, backend):
    env = dict(os.environ, SANDLOT_EXAMPLE_BACKEND=backend)
    done = subprocess.run([sys.executable, str(EXAMPLES / example)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_on_docker(example):
    out = run(example, "docker")
    for text in EXPECTED[example]:
        assert text in out, out


@pytest.mark.parametrize("example", ON_WASM)
def test_example_on_wasm(example):
    out = run(example, "wasm")
    for text in EXPECTED[example]:
        assert text in out, out
