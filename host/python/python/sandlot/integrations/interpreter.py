"""``CodeInterpreter``: the session behind every framework's tool, and what a model reads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from .._native import Execution, Sandlot, Session

# Enough of a run's output for a model to reason about, not enough to flood its context.
_MAX_CHARS = 20_000


class CodeInterpreter:
    """A lazily opened sandlot session that tools run code in.

    ``language`` and the keyword arguments are those of ``Sandlot.session``
    (``backend=``, ``policy=``, ``timeout=``, ``libraries=``...); ``host`` is the
    ``Sandlot`` to open it on (the environment's by default). Calls from several
    threads take turns; ``close()`` (or leaving a ``with``) ends the session."""

    def __init__(self, language: str = "python", *, host: Sandlot | None = None, **session: Any) -> None:
        self.language = language
        self._host = host
        self._options = session
        self._session: Session | None = None
        self._lock = threading.Lock()

    @property
    def description(self) -> str:
        """What a tool built on this interpreter tells the model."""
        return (
            f"Runs {self.language} code in a sandbox and returns its exit code, stdout, stderr "
            "and the files it wrote to output/. State (variables, imports, files) persists "
            "between calls. There is no network unless the sandbox allows it."
        )

    def execute(self, code: str) -> Execution:
        """Runs ``code`` and returns sandlot's ``Execution``."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, not {type(code).__name__}")
        with self._lock:
            if self._session is None or self._session.closed:
                host = self._host or Sandlot()
                self._host = host
                self._session = host.session(self.language, **self._options)
            return self._session.run(code)

    def run(self, code: str) -> str:
        """Runs ``code`` and returns what the model reads (``describe``)."""
        return describe(self.execute(code))

    async def arun(self, code: str) -> str:
        """``run`` for asyncio: the event loop keeps turning while the code runs. The
        agent frameworks' tools are this method; they read its arguments from here.

        Args:
            code: The program to run.
        """
        return await asyncio.to_thread(self.run, code)

    def close(self) -> None:
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None

    def __enter__(self) -> CodeInterpreter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe(execution: Execution) -> str:
    """An ``Execution`` as text a model reads: how it ended, its output, its files."""
    lines = [f"exit_code: {execution.exit_code}"]
    if execution.end_reason != "completed":
        lines.append(f"ended: {execution.end_reason.replace('-', ' ')}")
    for name, text in (("stdout", execution.stdout), ("stderr", execution.stderr)):
        if text:
            if len(text) > _MAX_CHARS:
                text = text[:_MAX_CHARS] + f"\n[... {len(text) - _MAX_CHARS} more characters]"
            lines.append(f"{name}:\n{text.rstrip()}")
    for file in execution.files:
        lines.append(f"file: {file.path} ({file.mime}, {file.size} bytes)")
    return "\n".join(lines)
