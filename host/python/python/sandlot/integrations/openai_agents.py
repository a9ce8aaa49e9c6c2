"""A code-execution tool for the OpenAI Agents SDK (``pip install openai-agents``)."""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, function_tool

from .interpreter import CodeInterpreter


def code_tool(interpreter: CodeInterpreter | None = None, *, name: str = "run_code", **session: Any) -> FunctionTool:
    """A ``FunctionTool`` that runs the model's code in ``interpreter`` (a new Python
    one, with ``session``'s options, if none is given)."""
    interpreter = interpreter or CodeInterpreter(**session)
    return function_tool(interpreter.arun, name_override=name, description_override=interpreter.description)
