"""Run code, install a library, run other languages."""

import os

import sandlot
from sandlot.llm_sandbox import SandboxSession

BACKEND = os.environ.get("SANDLOT_EXAMPLE_BACKEND", "docker")
NUMPY = "import numpy as np\narr = np.array([1, 2, 3, 4, 5])\nprint(f'Mean: {np.mean(arr)}')"


def native() -> None:
    host = sandlot.Sandlot()
    with host.session("python", backend=BACKEND, libraries=["numpy"]) as session:
        print(session.run('print("Hello from sandlot!")').stdout, end="")
        run = session.run(NUMPY)
        print(run.stdout, end="", flush=True)
        assert run.exit_code == 0, run.stderr
    if BACKEND != "wasm":
        with host.session("go", backend=BACKEND) as go:
            print(go.run('package main\nimport "fmt"\nfunc main() { fmt.Println("Hello from Go!") }').stdout, end="")


def llm_sandbox_api() -> None:
    with SandboxSession(backend=BACKEND, lang="python") as session:
        print(session.run('print("Hello from LLM Sandbox!")').stdout, end="")
        result = session.run(NUMPY, libraries=["numpy"])
        print(result.stdout, end="")
        assert result.exit_code == 0, result.stderr


if __name__ == "__main__":
    native()
    llm_sandbox_api()
