"""The OpenAI Agents SDK's E2B sandbox client (`openai-agents[e2b]`, pinned in
tests/run.sh) against `sandlot serve --e2b`: the client object used directly, as an
agent's sandbox tools use it, without a model call.

    e2b_agents.py TEMPLATE

E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY come from the environment. Prints
`ok: ...` for each check; any failure raises.
"""

import asyncio
import io
import sys
from pathlib import Path

from agents.extensions.sandbox.e2b import E2BSandboxClient, E2BSandboxClientOptions
from agents.sandbox import Manifest

template = sys.argv[1]


def ok(what):
    print(f"ok: {what}", flush=True)


async def main():
    client = E2BSandboxClient()
    options = E2BSandboxClientOptions(
        sandbox_type="e2b",
        template=template,
        timeout=120,
        # sandlot ends a sandbox at its timeout: it does not pause one (yet).
        on_timeout="kill",
        metadata={"suite": "e2b-agents"},
    )
    session = await client.create(manifest=Manifest(), options=options)
    async with session:
        ok("opened")
        # The SDK made its workspace root (/workspace, the manifest's) and runs every
        # command there.
        ran = await session.exec("echo hello from $(pwd); echo warn >&2; exit 3")
        assert ran.exit_code == 3, ran
        assert ran.stdout == b"hello from /workspace\n", ran.stdout
        assert ran.stderr == b"warn\n", ran.stderr
        ok("a command ran, with its output and exit code")

        await session.write(Path("notes/plan.md"), io.BytesIO(b"# plan\n- step one\n"))
        counted = await session.exec("wc -l < notes/plan.md")
        assert counted.stdout.strip() == b"2", counted
        back = await session.read(Path("notes/plan.md"))
        assert back.read() == b"# plan\n- step one\n"
        listed = [Path(entry.path).name for entry in await session.ls(Path("notes"))]
        assert listed == ["plan.md"], listed
        ok("files written, seen by commands, read and listed")
    print("sandbox:", session.state.sandbox_id, flush=True)


asyncio.run(main())
