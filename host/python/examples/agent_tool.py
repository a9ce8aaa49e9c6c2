"""A code-execution tool for an agent framework (here LangChain; see
sandlot.integrations for the OpenAI Agents SDK and Pydantic AI). The tool is invoked
directly, as the framework invokes it when a model asks for it."""

import os

from sandlot.integrations import CodeInterpreter
from sandlot.integrations.langchain import code_tool

BACKEND = os.environ.get("SANDLOT_EXAMPLE_BACKEND", "docker")

if __name__ == "__main__":
    with CodeInterpreter("python", backend=BACKEND) as interpreter:
        tool = code_tool(interpreter)
        print(tool.invoke({"code": "import statistics\ndata = [3, 1, 4, 1, 5, 9]"}))
        print(tool.invoke({"code": "print(statistics.mean(data))"}))
