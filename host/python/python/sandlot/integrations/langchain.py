"""A code-execution tool for LangChain (``pip install langchain-core``)."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from .interpreter import CodeInterpreter


class CodeInput(BaseModel):
    code: str = Field(description="The program to run.")


def code_tool(interpreter: CodeInterpreter | None = None, *, name: str = "run_code", **session: Any) -> StructuredTool:
    """A ``StructuredTool`` (sync ``invoke`` and async ``ainvoke``) that runs the model's
    code in ``interpreter`` (a new Python one, with ``session``'s options, if none)."""
    interpreter = interpreter or CodeInterpreter(**session)
    return StructuredTool.from_function(
        func=interpreter.run,
        coroutine=interpreter.arun,
        name=name,
        description=interpreter.description,
        args_schema=CodeInput,
    )
