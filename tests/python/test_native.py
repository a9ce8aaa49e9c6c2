"""The native API on the wasm backend: runs, state, files, policy, callbacks,
Ctrl-C-style interrupts, errors, and nothing left behind."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import sandlot


def test_a_run_returns_its_output_exit_code_and_backend(python):
    run = python.run("print(6 * 7)")
    assert run.stdout == "42\n"
    assert run.stdout_bytes == b"42\n"
    assert run.exit_code == 0 and run.success and run.end_reason == "completed"
    assert run.backend == "wasm" and run.language == "python"
    assert run.to_dict()["schema"] == "sandlot.execution/1"


def test_state_lasts_from_one_run_to_the_next(python):
    python.run("x = 6 * 7")
    assert python.run("print(x)").stdout == "42\n"


def test_a_failing_program_is_an_exit_code_not_an_exception(python):
    run = python.run("import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)")
    assert run.exit_code == 3 and not run.success
    assert "oops" in run.stderr


def test_a_timeout_stops_the_run_and_says_so(python):
    run = python.run("while True: pass", timeout=0.5)
    assert run.timed_out and run.end_reason == "timed-out" and run.exit_code == 124
    assert python.run("print('still here')").stdout == "still here\n"


def test_files_come_back_with_bytes_and_save_below_their_folder(python, tmp_path):
    run = python.run("open('output/report.txt', 'w').write('mean 5')")
    [report] = run.files
    assert (report.path, report.bytes, report.size, report.mime) == (
        "report.txt",
        b"mean 5",
        6,
        "text/plain",
    )
    assert not report.is_plot and run.plots == []
    saved = report.save(tmp_path)
    assert saved.read_bytes() == b"mean 5" and saved.parent == tmp_path


def test_sandbox_files_are_read_written_listed_and_copied(python, tmp_path):
    python.write_file("data/in.txt", "hello")
    assert python.read_file("data/in.txt") == b"hello"
    assert python.list_files("data") == ["in.txt"]
    assert "data/" in python.list_files()
    (tmp_path / "up.csv").write_text("a,b\n1,2\n")
    python.copy_in(tmp_path / "up.csv", "data")
    assert python.run("print(open('data/up.csv').read().splitlines()[1])").stdout == "1,2\n"
    written = python.copy_out("data", tmp_path / "down")
    assert sorted(p.name for p in written) == ["in.txt", "up.csv"]


def test_sandbox_files_are_described_made_moved_and_removed(python):
    python.write_file("notes/a.txt", "hello")
    info = python.file_info("notes/a.txt")
    assert (info["kind"], info["size"]) == ("file", 5) and info["modified"] > 0
    assert python.file_info()["kind"] == "dir"
    assert python.make_dir("made/deeper") is True
    assert python.make_dir("made") is False
    python.rename("notes/a.txt", "made/deeper/b.txt")
    assert python.read_file("made/deeper/b.txt") == b"hello"
    python.remove("made")
    with pytest.raises(sandlot.NotFoundError):
        python.file_info("made")
    with pytest.raises(sandlot.NotFoundError):
        python.remove("made")


def test_callbacks_see_output_as_it_is_written_and_the_exit_code_survives(python):
    seen = []
    run = python.run(
        "import sys\nfor i in range(3): print(i, flush=True)\nsys.exit(2)",
        on_stdout=seen.append,
    )
    assert "".join(seen) == "0\n1\n2\n"
    assert run.exit_code == 2


def test_a_callback_that_raises_is_reported_with_the_run(python):
    def broken(_text):
        raise RuntimeError("callback broke")

    with pytest.raises(sandlot.CallbackError) as raised:
        python.run("print('a')\nprint('b')", on_stdout=broken)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert raised.value.execution.stdout == "a\nb\n"


def test_an_interrupt_from_another_thread_stops_the_run(python):
    interrupt = sandlot.Interrupt()
    threading.Timer(0.3, interrupt.interrupt).start()
    started = time.monotonic()
    run = python.run("while True: pass", interrupt=interrupt, timeout=20)
    assert run.end_reason == "interrupted"
    assert time.monotonic() - started < 10
    assert python.run("print(1)").stdout == "1\n"


def test_the_gil_is_released_while_a_run_waits(python):
    ticks = []
    ticker = threading.Thread(target=lambda: [ticks.append(time.sleep(0.01)) for _ in range(20)])
    ticker.start()
    python.run("import time\ntime.sleep(0.5)")
    ticker.join()
    assert len(ticks) == 20


def test_policy_blocks_code_before_it_runs(host):
    strict = sandlot.Policy("strict", block_at="medium")
    with host.session("python", backend="wasm", policy=strict) as session:
        with pytest.raises(sandlot.BlockedError) as raised:
            session.run("import os\nos.system('id')")
        assert raised.value.kind == "blocked" and not raised.value.retryable


def test_a_secret_is_masked_in_what_comes_back(host):
    with host.session("python", backend="wasm", secrets={"API_TOKEN": "s3cr3t-value"}) as session:
        run = session.run("import os\nprint(os.environ['API_TOKEN'])")
        assert "s3cr3t-value" not in run.stdout and run.exit_code == 0


def test_languages_backends_and_plans_describe_the_host(host):
    assert "python" in [language["id"] for language in host.languages()]
    assert host.backends()[0] == "wasm"
    plan = host.plan("java", "public class Hello { public static void main(String[] a) {} }")
    assert plan["files"][0]["path"] == "Hello.java"


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda h: h.session("cobol"), sandlot.NotFoundError, "unknown language `cobol`"),
        (lambda h: h.session("python", backend="nope"), sandlot.NotFoundError, "no backend `nope`"),
        (lambda h: h.session("python", lang="python"), TypeError, "'lang'"),
        (lambda h: h.session("python", network="sometimes"), ValueError, "network"),
        (lambda h: h.session("python", memory="lots"), ValueError, "memory"),
        (lambda h: h.session("python", timeout=-1), ValueError, "timeout"),
        (lambda h: sandlot.Policy(netwrk="off"), sandlot.InvalidInputError, "netwrk"),
        (lambda h: sandlot.Sandlot(pools={"docker": {"max": 4}}), ValueError, "max"),
    ],
)
def test_bad_input_raises_a_clear_python_exception(host, call, error, words):
    with pytest.raises(error) as raised:
        call(host)
    assert words in str(raised.value)


def test_bad_run_arguments_name_what_was_wrong(python):
    with pytest.raises(TypeError, match="code"):
        python.run(42)
    with pytest.raises(TypeError, match="on_stdout must be callable"):
        python.run("print(1)", on_stdout="not a function")


def test_a_closed_session_used_again_says_it_is_closed(host):
    session = host.session("python", backend="wasm")
    session.close()
    assert session.closed
    with pytest.raises(sandlot.SessionEndedError, match="closed"):
        session.run("print(1)")


def test_request_rules_are_read_and_refused_where_they_cannot_hold(host):
    policy = sandlot.Policy(network="allow-list", allow=["api.example.com"],
                            requests=["GET api.example.com/v1/**"])
    assert policy == sandlot.Policy.from_toml(
        'network = "allow-list"\nallow = ["api.example.com"]\nrequests = ["GET api.example.com/v1/**"]')
    with pytest.raises(sandlot.InvalidInputError, match="api.example.com/a/../b"):
        sandlot.Policy(network="allow-list", allow=["api.example.com"],
                       requests=["GET api.example.com/a/../b"])
    with host.session("python", backend="wasm") as session:
        # A wasm session has no network, so no allow-list to narrow.
        with pytest.raises(sandlot.InvalidInputError, match="allow-list"):
            session.update_network(["GET api.example.com/v1/**"])
        with pytest.raises(sandlot.InvalidInputError, match="not a method"):
            session.update_network(["G3T api.example.com"])
        assert session.update_network([]) == []


def test_opening_and_closing_200_sessions_leaks_no_fd_or_thread(host):
    def counts():
        return len(os.listdir("/proc/self/fd")), threading.active_count(), len(
            os.listdir("/proc/self/task")
        )

    with host.session("python", backend="wasm") as warm:
        warm.run("print(1)")
    fds, threads, tasks = counts()
    for _ in range(200):
        with host.session("python", backend="wasm") as session:
            assert session.run("print(1)").stdout == "1\n"
    fds_after, threads_after, tasks_after = counts()
    assert (fds_after, threads_after) == (fds, threads)
    # A leak grows the OS threads; a pool may retire one meanwhile (tokio's idle
    # blocking threads end after 10 s: a CI run saw one fewer after the loop).
    assert tasks_after <= tasks, (tasks, tasks_after)


# How a program may have set up SIGINT before its run: Python's own handler; an
# asyncio loop that ran and ended (it takes and gives back the handler and the
# signal wakeup descriptor a run on the main thread borrows); a handler of its own.
# Each sets one explicitly: a child started from a background job (CI runs as one)
# inherits SIGINT ignored, and Python then installs no handler of its own.
DEFAULT = "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
CTRL_C_SETUPS = {
    "default handler": DEFAULT,
    "after asyncio.run": DEFAULT + "import asyncio\nasyncio.run(asyncio.sleep(0))\n",
    "own handler": (
        "def handler(signum, frame):\n"
        "    raise KeyboardInterrupt('mine')\n"
        "signal.signal(signal.SIGINT, handler)\n"
    ),
}


@pytest.mark.parametrize("setup", sorted(CTRL_C_SETUPS))
def test_ctrl_c_interrupts_a_run_on_the_main_thread_and_the_session_goes_on(tmp_path, setup):
    # In a child of its own: the KeyboardInterrupt must not reach pytest.
    script = tmp_path / "ctrl_c.py"
    script.write_text(
        "import signal, sys, time\n"
        "import sandlot\n"
        + CTRL_C_SETUPS[setup]
        + "with sandlot.Sandlot().session('python', backend='wasm') as session:\n"
        "    session.run('x = 1')\n"
        "    print('ready', flush=True)\n"
        "    started = time.monotonic()\n"
        "    try:\n"
        "        session.run('while True: pass', timeout=30)\n"
        "        print('not interrupted')\n"
        "    except KeyboardInterrupt:\n"
        "        print('interrupted after', round(time.monotonic() - started), flush=True)\n"
        "    print(session.run('print(6 * 7)').stdout, end='')\n"
        "    session.run('while True: pass', timeout=1)\n"
        "    print('a later run ends at its own limit', flush=True)\n"
    )
    child = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    assert child.stdout.readline() == "ready\n"
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    lines = out.splitlines()
    assert lines[0].startswith("interrupted after"), out
    assert int(lines[0].split()[-1]) < 10
    assert lines[1] == "42"
    # The SIGINT of the first run is not left behind to stop the next.
    assert lines[2] == "a later run ends at its own limit", out
