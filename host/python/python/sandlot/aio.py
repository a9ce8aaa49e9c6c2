"""sandlot for asyncio: ``AsyncSandlot`` and ``AsyncSession`` await what ``Sandlot``
and ``Session`` do, on threads of their own, so the event loop never waits for a
sandbox. A run whose task is cancelled is interrupted, and the cancellation goes on.

::

    async with sandlot.AsyncSandlot() as host:
        async with await host.session("python") as session:
            runs = await asyncio.gather(*(session.run(f"print({i})") for i in range(3)))
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Any

from ._native import Execution, Interrupt, Sandlot, Session


class AsyncSandlot:
    """``Sandlot`` for asyncio. Takes the same arguments, and ``max_threads``: how
    many calls may wait for sandboxes at once (each waits on a thread of its own)."""

    def __init__(self, *args: Any, max_threads: int = 64, **kwargs: Any) -> None:
        self._sync = Sandlot(*args, **kwargs)
        self._threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_threads, thread_name_prefix="sandlot"
        )

    @property
    def sync(self) -> Sandlot:
        """The ``Sandlot`` underneath."""
        return self._sync

    async def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._threads, functools.partial(function, *args, **kwargs)
        )

    async def session(self, language: str, **kwargs: Any) -> AsyncSession:
        """Opens a session, as ``Sandlot.session`` does."""
        session = await self._call(self._sync.session, language, **kwargs)
        return AsyncSession(session, self)

    def languages(self) -> list[dict[str, Any]]:
        return self._sync.languages()

    def backends(self) -> list[str]:
        return self._sync.backends()

    def plan(self, language: str, code: str, **kwargs: Any) -> dict[str, Any]:
        return self._sync.plan(language, code, **kwargs)

    async def pool_stats(self, backend: str) -> dict[str, Any]:
        return await self._call(self._sync.pool_stats, backend)

    async def close(self) -> None:
        """Closes the pools (see ``Sandlot.close``) and the threads."""
        await self._call(self._sync.close)
        self._threads.shutdown(wait=False)

    async def __aenter__(self) -> AsyncSandlot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSession:
    """``Session`` for asyncio, from ``AsyncSandlot.session``."""

    def __init__(self, session: Session, host: AsyncSandlot) -> None:
        self._sync = session
        self._host = host

    @property
    def sync(self) -> Session:
        """The ``Session`` underneath."""
        return self._sync

    async def _interruptible(self, method: Any, code: str, kwargs: dict[str, Any]) -> Execution:
        interrupt = kwargs.setdefault("interrupt", Interrupt())
        future = asyncio.ensure_future(self._host._call(method, code, **kwargs))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # The thread cannot be cancelled; the run can. Wait for it to stop, so
            # that the session is free again when the cancellation arrives.
            interrupt.interrupt()
            try:
                await future
            except Exception:
                pass
            raise

    async def run(self, code: str, **kwargs: Any) -> Execution:
        """Runs ``code``, as ``Session.run`` does."""
        return await self._interruptible(self._sync.run, code, kwargs)

    async def shell(self, command: str, **kwargs: Any) -> Execution:
        """Runs a shell command, as ``Session.shell`` does."""
        return await self._interruptible(self._sync.shell, command, kwargs)

    async def read_file(self, path: str) -> bytes:
        return await self._host._call(self._sync.read_file, path)

    async def write_file(self, path: str, data: bytes | str) -> None:
        await self._host._call(self._sync.write_file, path, data)

    async def list_files(self, path: str = "") -> list[str]:
        return await self._host._call(self._sync.list_files, path)

    async def file_info(self, path: str = "") -> dict[str, Any]:
        return await self._host._call(self._sync.file_info, path)

    async def make_dir(self, path: str) -> bool:
        return await self._host._call(self._sync.make_dir, path)

    async def remove(self, path: str) -> None:
        await self._host._call(self._sync.remove, path)

    async def rename(self, src: str, dest: str) -> None:
        await self._host._call(self._sync.rename, src, dest)

    async def copy_in(self, src: Any, dest: str = "") -> None:
        await self._host._call(self._sync.copy_in, src, dest)

    async def copy_out(self, src: str, dest: Any) -> list[Any]:
        return await self._host._call(self._sync.copy_out, src, dest)

    async def update_network(self, requests: list[str]) -> list[str]:
        return await self._host._call(self._sync.update_network, requests)

    async def close(self) -> None:
        await self._host._call(self._sync.close)

    @property
    def language(self) -> str:
        return self._sync.language

    @property
    def backend(self) -> str:
        return self._sync.backend

    @property
    def closed(self) -> bool:
        return self._sync.closed

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
