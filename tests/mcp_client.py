"""A third-party MCP client for `sandlot mcp`: the official Python SDK (`mcp` from
PyPI), a separate implementation of the protocol from the Rust SDK the other tests
use. tests/mcp.rs runs it; tests/run.sh installs the SDK in a virtual environment.

    mcp_client.py stdio PATH-TO-SANDLOT
    mcp_client.py http http://127.0.0.1:PORT/mcp

Prints one line per check and exits non-zero at the first that fails.
"""

import asyncio
import base64
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from checks import check


def summary(result):
    return json.loads(result.content[0].text)


async def exercise(session):
    await session.initialize()
    tools = {tool.name for tool in (await session.list_tools()).tools}
    check("the tools are listed", {"execute_code", "open_session", "run_in_session"} <= tools, tools)

    plot = await session.call_tool(
        "execute_code",
        {
            "language": "python",
            "backend": "wasm",
            "code": "import matplotlib.pyplot as plt\nplt.plot([3, 1, 2])\nplt.show()\nprint('drawn')",
        },
    )
    check("python runs", summary(plot)["stdout"] == "drawn\n", plot.content[0].text)
    images = [c for c in plot.content if c.type == "image"]
    check("the plot is an image", len(images) == 1 and images[0].mime_type == "image/png", plot.content)
    check("the image is a PNG", base64.b64decode(images[0].data)[:8] == b"\x89PNG\r\n\x1a\n")

    opened = await session.call_tool("open_session", {"language": "python", "backend": "wasm"})
    session_id = summary(opened)["session_id"]
    await session.call_tool("run_in_session", {"session_id": session_id, "code": "kept = 'across calls'"})
    read = await session.call_tool("run_in_session", {"session_id": session_id, "code": "print(kept)"})
    check("a variable stays in the session", summary(read)["stdout"] == "across calls\n", read.content[0].text)

    refused = await session.call_tool(
        "open_session", {"language": "python", "backend": "wasm", "network": "on"}
    )
    check("a looser policy is refused", refused.is_error and "policy.network" in refused.content[0].text,
          refused.content[0].text)
    closed = await session.call_tool("close_session", {"session_id": session_id})
    check("the session closes", not closed.is_error, closed.content)


async def main():
    mode, target = sys.argv[1], sys.argv[2]
    if mode == "stdio":
        server = StdioServerParameters(command=target, args=["mcp"])
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                await exercise(session)
    else:
        async with streamable_http_client(target) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session)


asyncio.run(main())
