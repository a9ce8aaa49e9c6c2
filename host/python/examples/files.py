"""Copy files into a sandbox, run a command, copy its output back."""

import os
import tempfile
from pathlib import Path

import sandlot
from sandlot.llm_sandbox import SandboxSession

BACKEND = os.environ.get("SANDLOT_EXAMPLE_BACKEND", "docker")
SCRIPT = "open('output/output.txt', 'w').write('hello from test.py')\nprint('ran test.py')\n"


def native(folder: Path) -> None:
    (folder / "test.py").write_text(SCRIPT)
    with sandlot.Sandlot().session("python", backend=BACKEND) as session:
        session.copy_in(folder / "test.py")
        run = session.run(open(folder / "test.py").read())  # or session.shell("python3 test.py")
        print(run.stdout, end="")
        for file in run.files:  # new files of output/ come back with the run
            print("saved", file.save(folder / "native"))


def llm_sandbox_api(folder: Path) -> None:
    (folder / "test.py").write_text(SCRIPT)
    with SandboxSession(backend=BACKEND, lang="python") as session:
        session.copy_to_runtime(str(folder / "test.py"), "/sandbox/test.py")
        if BACKEND == "wasm":
            print(session.run(SCRIPT).stdout, end="")  # no shell in the wasm sandbox
        else:
            print(session.execute_command("python3 test.py").stdout, end="")
        session.copy_from_runtime("/sandbox/output/output.txt", str(folder / "output.txt"))
        print("copied back:", (folder / "output.txt").read_text())


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        native(Path(tmp))
        llm_sandbox_api(Path(tmp))
