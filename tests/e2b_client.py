"""E2B's official Python SDKs (pinned in tests/run.sh) against `sandlot serve --e2b`.

    e2b_client.py TEMPLATE SHELL

E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (Alice's key) come from the
environment, BOB_KEY is a second key. TEMPLATE picks the backend (`python` is wasm,
`python@docker` pooled Docker); SHELL is `yes` where the backend has a shell. Prints
`ok: ...` for each check; any failure raises.
"""

import base64
import os
import sys
import time

from e2b import (
    CommandExitException,
    FileNotFoundException,
    InvalidArgumentException,
    NotFoundException,
    SandboxQuery,
    SandboxState,
)
from e2b_code_interpreter import Sandbox

template, shell = sys.argv[1], sys.argv[2] == "yes"
bob = os.environ["BOB_KEY"]
tag = f"e2b-client-{os.getpid()}-{template}"


def ok(what):
    print(f"ok: {what}", flush=True)


sandbox = Sandbox.create(
    template=template, timeout=120, metadata={"suite": tag}, envs={"GREETING": "hello"}
)
ok("created")

first = sandbox.run_code("x = 41")
assert first.error is None, first.error
second = sandbox.run_code("print(x + 1)")
assert second.logs.stdout == ["42\n"], second.logs
assert second.execution_count == 2, second.execution_count
ok("state across run_code calls")

value = sandbox.run_code("x * 2")
assert value.text == "82" and value.logs.stdout == [], value
frame = sandbox.run_code("import pandas as pd\nprint('made')\npd.DataFrame({'a': [1, 2]})")
main = [r for r in frame.results if r.is_main_result]
assert len(main) == 1 and "<table" in main[0].html and "a" in main[0].text, frame
assert frame.logs.stdout == ["made\n"], frame.logs
shown = sandbox.run_code("display('one'); display({'k': 1})\nNone")
assert [r.text for r in shown.results] == ["'one'", "{'k': 1}"], shown
assert shown.text is None and not any(r.is_main_result for r in shown.results), shown
ok("a last value as the main result, a frame as HTML, display()")

context = sandbox.create_code_context(language="python")
sandbox.run_code("y = 1", context=context)
assert sandbox.run_code("y + 1", context=context).text == "2"
assert sandbox.run_code("'y' in globals()").text == "False", "contexts share state"
assert context.id in [c.id for c in sandbox.list_code_contexts()]
sandbox.restart_code_context(context)
restarted = sandbox.run_code("'y' in globals(), 6 * 7", context=context)
assert restarted.text == "(False, 42)", restarted
sandbox.remove_code_context(context)
assert context.id not in [c.id for c in sandbox.list_code_contexts()]
ok("contexts with their own state, restarted and removed")

env = sandbox.run_code("import os; print(os.environ['GREETING'])")
assert env.logs.stdout == ["hello\n"], env.logs
ok("the sandbox's environment")

streamed = []
chart = sandbox.run_code(
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "print('drawing')\nplt.plot([1, 4, 9])\nplt.show()",
    on_stdout=lambda message: streamed.append(message.line),
)
pngs = [r.png for r in chart.results if r.png]
assert len(pngs) == 1, chart
assert base64.b64decode(pngs[0]).startswith(b"\x89PNG\r\n\x1a\n")
assert streamed == ["drawing\n"], streamed
ok("a matplotlib chart as a PNG result, output streamed")

failed = sandbox.run_code("def f():\n    return 1 / 0\nf()")
assert failed.error is not None, failed
assert failed.error.name == "ZeroDivisionError", failed.error
assert failed.error.value == "division by zero", failed.error
assert "return 1 / 0" in failed.error.traceback, failed.error.traceback
assert failed.logs.stderr == [], failed.logs
ok("an exception as an error with its traceback")

text = "naïve café\n" * 3
sandbox.files.write("/home/user/notes/a.txt", text)
assert sandbox.files.read("/home/user/notes/a.txt") == text
blob = os.urandom(10 << 20)
sandbox.files.write("blob.bin", blob)
assert sandbox.files.read("/home/user/blob.bin", format="bytes") == bytes(blob)
seen = sandbox.run_code("print(open('notes/a.txt').read().count('café'))")
assert seen.logs.stdout == ["3\n"], seen.logs
ok("files written and read back, text and 10 MB binary")

from e2b.sandbox.filesystem.filesystem import FileType
assert sandbox.files.make_dir("/home/user/made/deeper") is True
assert sandbox.files.make_dir("made") is False
info = sandbox.files.rename("notes/a.txt", "/home/user/made/deeper/b.txt")
assert (info.name, info.path, info.type) == ("b.txt", "/home/user/made/deeper/b.txt", FileType.FILE), info
stat = sandbox.files.get_info("made/deeper/b.txt")
assert stat.size == len(text.encode()) and stat.permissions.startswith("-rw"), stat
assert stat.modified_time.year >= 2024, stat
assert not sandbox.files.exists("notes/a.txt")
listed = sorted((e.path, e.type) for e in sandbox.files.list("/home/user/made", depth=2))
assert listed == [
    ("/home/user/made/deeper", FileType.DIR),
    ("/home/user/made/deeper/b.txt", FileType.FILE),
], listed
top = [e.name for e in sandbox.files.list("/home/user")]
assert "made" in top and "blob.bin" in top, top
linked = sandbox.run_code("import os\nos.symlink('made', 'ln')")
assert linked.error is None, linked.error
kinds = {e.name: e.type for e in sandbox.files.list("/home/user")}
assert kinds["ln"] == FileType.SYMLINK, kinds
sandbox.files.remove("ln")
assert sandbox.files.exists("made/deeper/b.txt"), "removing a link removed its target"
sandbox.files.remove("/home/user/made")
assert not sandbox.files.exists("/home/user/made")
try:
    sandbox.files.get_info("/home/user/made")
    raise AssertionError("a removed directory was found")
except FileNotFoundException:
    pass
try:
    sandbox.files.list("/etc")
    raise AssertionError("a path outside the workspace was listed")
except InvalidArgumentException as e:
    assert "/home/user" in str(e), e
# /workspace, the workspace's own name in sandlot's sandboxes, is the same place.
written = sandbox.files.write("/workspace/w.txt", "same")
assert written.path == "/workspace/w.txt", written
assert sandbox.files.read("/home/user/w.txt") == "same"
ok("files listed, described, made, moved and removed")

def streams_and_fails(prints, fails):
    """`prints` writes one and GREETING to stdout, two to stderr; `fails` writes
    partial and exits 3."""
    out = []
    done = sandbox.commands.run(prints, on_stdout=out.append)
    assert done.exit_code == 0 and done.stdout == "one\nhello\n", done
    assert done.stderr == "two\n", done
    assert "".join(out) == "one\nhello\n", out
    try:
        sandbox.commands.run(fails)
        raise AssertionError("a failing command did not raise")
    except CommandExitException as e:
        assert e.exit_code == 3 and e.stdout == "partial\n", e


if shell:
    streams_and_fails("echo one; echo two >&2; echo $GREETING", "echo partial; exit 3")
    # A directory outside the workspace is where a command starts, as in E2B.
    sandbox.commands.run("mkdir -p \"/tmp/it's here\"")
    assert sandbox.commands.run("pwd", cwd="/tmp/it's here").stdout == "/tmp/it's here\n"
    ok("commands.run with streamed output and exit codes")
    print("container:", sandbox.commands.run("hostname").stdout.strip(), flush=True)
else:
    # No shell: a command runs the interpreter, in the sandbox's files.
    streams_and_fails(
        "python3 -c \"import os, sys; print('one'); print('two', file=sys.stderr); "
        "print(os.environ['GREETING'])\"",
        "python3 -c 'import sys; print(\"partial\"); sys.exit(3)'",
    )
    sandbox.files.write("job.py", "import sys\nprint(sys.argv)\n")
    argv = sandbox.commands.run("python3 job.py a 'b c'").stdout
    assert argv == "['job.py', 'a', 'b c']\n", argv
    try:
        sandbox.commands.run("echo hi | wc -c")
        raise AssertionError("shell syntax ran on a backend without a shell")
    except CommandExitException:
        raise
    except Exception as e:  # noqa: BLE001 - the SDK's class for the refusal
        assert "python3 -c CODE" in str(e), e
    ok("commands.run runs the interpreter where there is no shell, exit codes, argv")

listed = Sandbox.list(query=SandboxQuery(metadata={"suite": tag})).next_items()
assert [s.sandbox_id for s in listed] == [sandbox.sandbox_id], listed
assert listed[0].metadata == {"suite": tag}, listed[0]
ok("listing by metadata")

again = Sandbox.connect(sandbox.sandbox_id)
assert again.run_code("print(x)").logs.stdout == ["41\n"]
ok("connect to a running sandbox")

if not shell:
    # wasm: the interpreter's memory is kept while paused, and back on connect.
    assert sandbox.pause() is True
    assert Sandbox.get_info(sandbox.sandbox_id).state == SandboxState.PAUSED
    assert sandbox.pause() is False, "pausing a paused sandbox"
    paused = Sandbox.list(
        query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.PAUSED])
    ).next_items()
    assert [s.sandbox_id for s in paused] == [sandbox.sandbox_id], paused
    running = Sandbox.list(
        query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.RUNNING])
    ).next_items()
    assert running == [], running
    resumed = Sandbox.connect(sandbox.sandbox_id, timeout=120)
    assert Sandbox.get_info(sandbox.sandbox_id).state == SandboxState.RUNNING
    assert resumed.run_code("print(x)").logs.stdout == ["41\n"]
    ok("pause keeps the memory; connect resumes it")
else:
    try:
        sandbox.pause()
        raise AssertionError("a sandbox that cannot keep its memory paused")
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - the SDK's class for the refusal
        assert "keeps running" in str(e), e
    assert sandbox.run_code("print(x)").logs.stdout == ["41\n"]
    ok("pause refused where the backend cannot keep the memory, the sandbox untouched")

# Bob's key sees nothing of Alice's sandbox, and can do nothing to it.
theirs = Sandbox.list(api_key=bob).next_items()
assert sandbox.sandbox_id not in [s.sandbox_id for s in theirs], theirs
for attempt in (
    lambda: Sandbox.connect(sandbox.sandbox_id, api_key=bob),
    lambda: Sandbox.get_info(sandbox.sandbox_id, api_key=bob),
):
    try:
        attempt()
        raise AssertionError("another key reached the sandbox")
    except NotFoundException:
        pass
assert Sandbox.kill(sandbox.sandbox_id, api_key=bob) is False
assert sandbox.run_code("print(x)").logs.stdout == ["41\n"]
ok("another key cannot see or touch it")

assert sandbox.kill() is True
try:
    Sandbox.get_info(sandbox.sandbox_id)
    raise AssertionError("a killed sandbox is still there")
except NotFoundException:
    pass
ok("kill")

short = Sandbox.create(template=template, timeout=120)
short.set_timeout(2)
time.sleep(4)
try:
    Sandbox.get_info(short.sandbox_id)
    raise AssertionError("the sandbox outlived its timeout")
except NotFoundException:
    pass
ok("a timeout ends the sandbox")

if not shell:
    # autoPause: its timeout pauses it, memory kept, instead of ending it.
    kept = Sandbox.create(template=template, timeout=120, lifecycle={"on_timeout": "pause"})
    kept.run_code("w = 'waited'")
    kept.set_timeout(2)
    time.sleep(4)
    assert Sandbox.get_info(kept.sandbox_id).state == SandboxState.PAUSED
    back = Sandbox.connect(kept.sandbox_id, timeout=60)
    assert back.run_code("print(w)").logs.stdout == ["waited\n"]
    assert back.kill() is True
    ok("a timeout pauses a sandbox made with on_timeout pause")
