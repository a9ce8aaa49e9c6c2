"""The asyncio API: runs are awaited on threads, never on the event loop."""

import asyncio
import time

import sandlot


def test_a_gather_of_20_runs_in_20_sessions_works():
    async def main():
        async with sandlot.AsyncSandlot() as host:
            sessions = await asyncio.gather(
                *(host.session("python", backend="wasm") for _ in range(20))
            )
            try:
                runs = await asyncio.gather(
                    *(s.run(f"print({i} * 2)") for i, s in enumerate(sessions))
                )
            finally:
                await asyncio.gather(*(s.close() for s in sessions))
            return [run.stdout for run in runs]

    assert asyncio.run(main()) == [f"{i * 2}\n" for i in range(20)]


def test_the_event_loop_keeps_turning_while_a_run_waits():
    async def main():
        async with sandlot.AsyncSandlot() as host:
            async with await host.session("python", backend="wasm") as session:
                ticks = 0

                async def tick():
                    nonlocal ticks
                    while True:
                        await asyncio.sleep(0.01)
                        ticks += 1

                ticker = asyncio.create_task(tick())
                await session.run("import time\ntime.sleep(0.5)")
                ticker.cancel()
                return ticks

    assert asyncio.run(main()) >= 20


def test_a_cancelled_run_is_interrupted_and_the_session_goes_on():
    async def main():
        async with sandlot.AsyncSandlot() as host:
            async with await host.session("python", backend="wasm") as session:
                started = time.monotonic()
                try:
                    await asyncio.wait_for(session.run("while True: pass", timeout=30), 0.3)
                except asyncio.TimeoutError:
                    pass
                stopped = time.monotonic() - started
                return stopped, (await session.run("print('after')")).stdout

    stopped, after = asyncio.run(main())
    assert stopped < 10 and after == "after\n"
