"""Drives `sandlot repl` at a real terminal (a pseudo-terminal), as a person would:
types a cell, presses Ctrl-C while it runs, and types the next one.

    python3 tests/repl_terminal.py SANDLOT_BINARY BACKEND

Prints what the terminal showed and exits 0 when the interrupted cell ended at once
and the REPL went on; tests/cli.rs runs it and checks what it printed.
"""

import os
import pty
import select
import sys
import time

sandlot, backend = sys.argv[1], sys.argv[2]
pid, terminal = pty.fork()
if pid == 0:
    os.execv(sandlot, [sandlot, "repl", "-l", "python", "--backend", backend, "--timeout", "300"])

seen = b""
# Everything the terminal showed, for the report.
shown = bytearray()


def wait_for(text, within=60):
    """Reads the terminal until `text` shows, or fails saying what did."""
    global seen
    deadline = time.monotonic() + within
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            shown.extend(seen)
            sys.exit(f"no {text!r} within {within} s; the terminal showed:\n{shown.decode(errors='replace')}")
        ready, _, _ = select.select([terminal], [], [], left)
        if ready:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                shown.extend(seen)
                sys.exit(f"the REPL ended before {text!r}:\n{shown.decode(errors='replace')}")
            seen += chunk
    # Consumed: the next wait looks past it.
    shown.extend(seen[: seen.index(text.encode()) + len(text)])
    seen = seen[seen.index(text.encode()) + len(text) :]


def type_line(line):
    os.write(terminal, line.encode() + b"\r")


wait_for("python> ")
type_line("kept = 'yes'")
wait_for("python> ")
type_line("import time; print('sleep' + 'ing', flush=True); time.sleep(200)")
wait_for("sleeping")
started = time.monotonic()
os.write(terminal, b"\x03")  # Ctrl-C, which the terminal turns into SIGINT
# What the backend says of the interrupted cell, then the prompt for the next one.
wait_for("sandlot: interrupted")
wait_for("python> ")
print(f"interrupted after {time.monotonic() - started:.1f} s")
type_line("print('kept:', kept if 'kept' in dir() else 'gone')")
wait_for("kept: ")
wait_for("python> ")
type_line(":quit")
_, status = os.waitpid(pid, 0)
sys.stdout.write((bytes(shown) + seen).decode(errors="replace"))
print(f"\nexit status {os.waitstatus_to_exitcode(status)}")
