"""The handler threads' hand-off (dexcli.engine.step_threads) on a ClockEventLoop: a lone call's
thread is woken as the loop is about to wait, not while the loop still runs (it would block on
the GIL once more); a thread that posts a result with nothing queued is idle by the time the
loop takes that result, so calls made one after another all run on one thread."""

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


def test_a_lone_call_waits_for_the_loop_to_wait_a_second_one_wakes_both() -> None:
    loop = ClockEventLoop(Clock())
    try:
        threads: StepThreads = loop._steps
        first = threads.submit(current_worker, (), contextvars.copy_context())
        loop.run_until_complete(first)  # a thread is started for it (none was idle)
        second = threads.submit(current_worker, (), contextvars.copy_context())
        assert threads._deferred is not None and len(threads._calls) == 1  # not woken yet: nothing ran
        third = threads.submit(threading.get_ident, (), contextvars.copy_context())
        assert threads._deferred is None  # a second call wakes the deferred thread with its own
        got = loop.run_until_complete(asyncio.gather(second, third))
        assert got[0] is not None and got[1] is not None
        lone = threads.submit(current_worker, (), contextvars.copy_context())
        assert threads._deferred is not None
        assert loop.run_until_complete(lone) is not None  # the selector's wait woke it
    finally:
        loop.close()


def test_close_ends_a_thread_whose_wake_was_deferred() -> None:
    loop = ClockEventLoop(Clock())
    threads: StepThreads = loop._steps
    worker = loop.run_until_complete(threads.submit(threading.current_thread, (), contextvars.copy_context()))
    threads.submit(int, (), contextvars.copy_context())
    assert threads._deferred is not None
    loop.close()  # drops the queued call and releases every parked thread
    worker.join(30)
    assert not worker.is_alive()


def test_without_deferral_a_call_wakes_its_thread_at_once() -> None:
    """A plain asyncio loop never calls `wake_deferred`: its pool wakes a thread per call."""
    loop = asyncio.new_event_loop()
    try:
        threads = StepThreads(loop, 2)
        assert loop.run_until_complete(threads.submit(lambda: 1, (), contextvars.copy_context())) == 1
        second = threads.submit(lambda: 2, (), contextvars.copy_context())
        assert threads._deferred is None
        assert loop.run_until_complete(second) == 2
        threads.close()
    finally:
        loop.close()
