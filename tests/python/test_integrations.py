"""sandlot.integrations: each framework's tool object, built by the framework and
invoked the way the framework invokes it, without a model."""

import asyncio
import json

import pytest

from sandlot.integrations import CodeInterpreter


@pytest.fixture
def interpreter(host):
    with CodeInterpreter("python", host=host, backend="wasm") as interpreter:
        yield interpreter


def test_the_interpreter_keeps_state_and_tells_the_model_how_code_ended(interpreter):
    assert interpreter.run("x = 6 * 7") == "exit_code: 0"
    assert interpreter.run("print(x)") == "exit_code: 0\nstdout:\n42"
    failed = interpreter.run("raise ValueError('nope')")
    assert failed.startswith("exit_code: 1\nstderr:\n") and "ValueError: nope" in failed
    wrote = interpreter.run("open('output/r.csv', 'w').write('a,b')")
    assert "file: r.csv (text/csv, 3 bytes)" in wrote


def test_openai_agents_function_tool(interpreter):
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from sandlot.integrations.openai_agents import code_tool

    tool = code_tool(interpreter)
    assert isinstance(tool, FunctionTool) and tool.name == "run_code"
    assert tool.params_json_schema["required"] == ["code"]

    async def call(code):
        args = json.dumps({"code": code})
        context = ToolContext(context=None, tool_name=tool.name, tool_call_id="call-1", tool_arguments=args)
        return await tool.on_invoke_tool(context, args)

    assert asyncio.run(call("y = 2")) == "exit_code: 0"
    assert asyncio.run(call("print(y * 21)")) == "exit_code: 0\nstdout:\n42"


def test_langchain_structured_tool(interpreter):
    from langchain_core.tools import BaseTool

    from sandlot.integrations.langchain import code_tool

    tool = code_tool(interpreter)
    assert isinstance(tool, BaseTool) and tool.name == "run_code"
    assert tool.invoke({"code": "print(6 * 7)"}) == "exit_code: 0\nstdout:\n42"
    assert asyncio.run(tool.ainvoke({"code": "print('async')"})) == "exit_code: 0\nstdout:\nasync"
    assert "sandbox" in tool.description


def test_pydantic_ai_tool_called_by_an_agent(interpreter):
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from sandlot.integrations.pydantic_ai import code_tool

    def model(messages, info):
        returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returned:
            assert [t.name for t in info.function_tools] == ["run_code"]
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": "print(6 * 7)"})])
        return ModelResponse(parts=[TextPart(returned[0].content)])

    agent = Agent(FunctionModel(model), tools=[code_tool(interpreter)])
    assert agent.run_sync("what is 6 times 7?").output == "exit_code: 0\nstdout:\n42"
