"""A code-execution tool for Pydantic AI (``pip install pydantic-ai-slim``)."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Tool

from .interpreter import CodeInterpreter


def code_tool(interpreter: CodeInterpreter | None = None, *, name: str = "run_code", **session: Any) -> Tool[Any]:
    """A ``Tool`` that runs the model's code in ``interpreter`` (a new Python one, with
    ``session``'s options, if none is given)."""
    interpreter = interpreter or CodeInterpreter(**session)
    return Tool(interpreter.arun, name=name, description=interpreter.description)
