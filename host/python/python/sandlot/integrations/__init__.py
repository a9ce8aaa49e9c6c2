"""Code execution as a tool for agent frameworks.

Each framework gets a function that builds its own tool object around one
``CodeInterpreter``, a sandlot session whose state persists from call to call (as a
notebook's does) until it is closed::

    from sandlot.integrations import CodeInterpreter
    from sandlot.integrations.openai_agents import code_tool   # or .langchain, .pydantic_ai

    with CodeInterpreter("python") as interpreter:
        agent = Agent(name="analyst", tools=[code_tool(interpreter)])

The frameworks are not dependencies of sandlot: install the one you use
(``openai-agents``, ``langchain-core``, ``pydantic-ai-slim``).
"""

from __future__ import annotations

from .interpreter import CodeInterpreter, describe

__all__ = ["CodeInterpreter", "describe"]
