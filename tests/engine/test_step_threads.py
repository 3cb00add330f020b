"""The handler threads' hand-off (dexcli.engine.step_threads): a thread that posts a result with
nothing queued is idle by the time the loop takes that result, so calls made one after another
(a sequential drive's) all run on one thread instead of going round several."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from dexcli.engine.clock import Clock, ClockEventLoop, run
from dexcli.engine.step_threads import StepThreads, current_worker


def test_one_call_after_another_runs_on_one_thread() -> None:
    async def go() -> set[int | None]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, ClockEventLoop)
        return {await loop.run_in_thread(current_worker) for _ in range(300)}

    workers = run(go, Clock())
    assert len(workers) == 1 and None not in workers


def test_a_thread_is_idle_once_its_result_is_taken() -> None:
    loop = asyncio.new_event_loop()
    try:
        threads = StepThreads(loop, 4)
        for i in range(50):
            assert loop.run_until_complete(threads.submit(lambda i=i: i, (), contextvars.copy_context())) == i
            assert len(threads._idle) == 1 and threads._threads == 1
        threads.close()
    finally:
        loop.close()


def test_a_thread_with_calls_queued_takes_the_next_one_without_parking() -> None:
    loop = asyncio.new_event_loop()
    try:
        threads = StepThreads(loop, 1)
        gate = threading.Event()
        first = threads.submit(gate.wait, (30,), contextvars.copy_context())
        rest = [threads.submit(threading.get_ident, (), contextvars.copy_context()) for _ in range(3)]
        gate.set()
        got = loop.run_until_complete(asyncio.gather(first, *rest))
        assert got[0] is True and len(set(got[1:])) == 1
        assert threads._threads == 1
        threads.close()
    finally:
        loop.close()


def test_close_ends_an_idle_thread() -> None:
    loop = asyncio.new_event_loop()
    threads = StepThreads(loop, 2)
    worker = loop.run_until_complete(threads.submit(threading.current_thread, (), contextvars.copy_context()))
    threads.close()
    worker.join(30)
    assert not worker.is_alive()
    loop.close()
