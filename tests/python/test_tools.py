"""Tools from Python: functions of the test process that sandboxed code calls, on the
wasm backend and, through the agent's endpoint, in a Docker container (the Rust
conformance suite covers every backend)."""

import threading
from typing import List, Optional

import pytest

import sandlot


@sandlot.tool
def add(a: int, b: int = 1) -> int:
    """The sum of a and b."""
    return a + b


def shout(text: str, times: Optional[int] = None) -> str:
    """TEXT, upper-cased."""
    return text.upper() * (times or 1)


def test_a_schema_comes_from_the_signature_and_the_docstring():
    assert add.name == "add" and add.description == "The sum of a and b."
    assert add.schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a"],
    }

    def listing(items: List[str], flag: bool) -> None:
        pass

    schema = sandlot.Tool(listing).schema
    assert schema["properties"]["items"] == {"type": "array", "items": {"type": "string"}}
    assert schema["required"] == ["items", "flag"]


@pytest.mark.parametrize("backend", ["wasm", "docker"])
def test_code_calls_python_functions_and_each_call_is_recorded(host, backend):
    with host.session("python", backend=backend, tools=[add, shout]) as session:
        run = session.run(
            "from sandlot_tools import add, shout\n"
            "print(sum(add(a=i) for i in range(100)), shout(text='hi', times=2))"
        )
        assert run.stdout == "5050 HIHI\n", run.stderr
        assert len(run.tool_calls) == 101
        assert {c["outcome"] for c in run.tool_calls} == {"ok"}
        assert run.tool_calls[0]["name"] == "add"
        assert run.to_dict()["tool_calls"][0]["name"] == "add"
        described = session.run("import sandlot_tools\nhelp(sandlot_tools.shout)").stdout
        assert "TEXT, upper-cased." in described and "text" in described


@pytest.mark.parametrize("backend", ["wasm", "docker"])
def test_an_exception_in_a_tool_reaches_the_code_as_a_tool_error(host, backend):
    def fails(why: str) -> None:
        """Always fails."""
        raise LookupError(f"no {why}")

    with host.session("python", backend=backend, tools=[fails]) as session:
        run = session.run(
            "import sandlot_tools as t\n"
            "try:\n    t.fails(why='fruit')\nexcept t.ToolError as e:\n    print('caught', e)"
        )
        assert run.stdout == "caught LookupError: no fruit\n", run.stderr
        assert run.tool_calls[0]["outcome"] == "tool_error"
        assert run.tool_calls[0]["message"] == "LookupError: no fruit"


def test_a_result_that_is_not_json_is_an_error_for_the_code(host):
    def opaque() -> object:
        return object()

    with host.session("python", backend="wasm", tools=[opaque]) as session:
        run = session.run(
            "import sandlot_tools as t\n"
            "try:\n    t.opaque()\nexcept t.ToolError as e:\n    print('refused')"
        )
        assert run.stdout == "refused\n", run.stderr
        assert "not JSON" in run.tool_calls[0]["message"]


def test_tools_run_on_another_thread_while_the_caller_waits(host):
    seen = []

    def where() -> str:
        seen.append(threading.current_thread() is threading.main_thread())
        return "here"

    with host.session("python", backend="wasm", tools=[where]) as session:
        assert session.run("import sandlot_tools as t\nprint(t.where())").stdout == "here\n"
    assert seen == [False]


def test_bad_tools_are_refused_with_what_is_wrong(host):
    with pytest.raises(TypeError, match="Tool objects or functions"):
        host.session("python", backend="wasm", tools=[42])
    with pytest.raises(sandlot.InvalidInputError, match="name"):
        host.session("python", backend="wasm", tools=[sandlot.Tool(add, name="not a name")])
    with pytest.raises(sandlot.InvalidInputError, match="registered already"):
        host.session("python", backend="wasm", tools=[add, add])
    with pytest.raises(sandlot.InvalidInputError, match="JSON Schema"):
        host.session("python", backend="wasm", tools=[sandlot.Tool(add, schema={"type": 5})])
