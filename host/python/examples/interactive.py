"""A session whose variables persist between runs."""

import os

import sandlot
from sandlot.llm_sandbox import InteractiveSandboxSession

BACKEND = os.environ.get("SANDLOT_EXAMPLE_BACKEND", "docker")


def native() -> None:
    # Every native session keeps its interpreter's state (one_shot=True turns that off).
    with sandlot.Sandlot().session("python", backend=BACKEND) as session:
        session.run("value = 21 * 2")
        print(session.run("print(f'Result: {value}')").stdout, end="")


def llm_sandbox_api() -> None:
    with InteractiveSandboxSession(backend=BACKEND, lang="python", history_size=200) as session:
        session.run("value = 21 * 2")
        print(session.run("print(f'Result: {value}')").stdout, end="")
        session.run("%pip install pandas")
        print(session.run("import pandas as pd; print(pd.DataFrame({'A': [1, 2, 3]}))").stdout, end="")


if __name__ == "__main__":
    native()
    llm_sandbox_api()
