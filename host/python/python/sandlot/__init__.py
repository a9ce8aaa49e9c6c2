"""sandlot runs untrusted, often model-written, code in sandboxes — in-process
WebAssembly, bubblewrap jails (``native``), Docker, Podman or Kubernetes — and hands
back its output, exit code and files::

    import sandlot
    with sandlot.Sandlot().session("python") as session:
        print(session.run("print(6 * 7)").stdout)

``AsyncSandlot`` is the same for asyncio. Errors are ``sandlot.errors`` classes.
"""

from __future__ import annotations

import atexit

from . import errors
from ._native import (
    Execution,
    File,
    Finding,
    Interrupt,
    Policy,
    Sandlot,
    Session,
    __version__,
    _close_all,
)
from .aio import AsyncSandlot, AsyncSession
from .tools import Tool, tool
from .errors import *  # noqa: F401,F403  (the exception classes, as sandlot.X)

# Pools keep warmed sandboxes (containers) until closed; a program that exits
# without closing its Sandlot must not leave them behind.
atexit.register(_close_all)

__all__ = [
    "AsyncSandlot",
    "AsyncSession",
    "Execution",
    "File",
    "Finding",
    "Interrupt",
    "Policy",
    "Sandlot",
    "Session",
    "Tool",
    "__version__",
    "errors",
    "tool",
    *errors.__all__,
]
