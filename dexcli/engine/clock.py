"""One clock for every timestamp and every wait, and an event loop that runs on it.

`Clock.now()` is epoch seconds: the time of this process's loop. Three ways to run it:
  - real:     wall time plus an offset (the clock of the flow this process drives, when that
              flow was skipped ahead: each flow has its own offset, see dexcli.engine.schedule);
  - time-skip (auto_advance with follow_real): real time, but whenever the loop has nothing
    to do until its next timer it jumps there instead of sleeping (`on_advance` is told by
    how much, so the engine can move the clocks of the flows it drives);
  - virtual (follow_real=False): time moves only by jumps — tests, where a ten-minute wait
    takes milliseconds.

`ClockEventLoop.time()` is `clock.now()`, so user code's `asyncio.sleep` and
`asyncio.wait_for` run on the same clock as the engine's deadlines. The jump happens inside
the selector: when the loop would block until a timer and no handler thread is busy, the
clock advances by that timeout and the loop goes on at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import selectors
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from dexcli.engine.step_threads import StepThreads, Then, Worker
from dexcli.store import Store

T = TypeVar("T")

VIRTUAL_EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: where virtual clocks start


class Clock:
    def __init__(self, *, follow_real: bool = True, auto_advance: bool = False,
                 start: float | None = None, offset: float = 0.0,
                 on_advance: Callable[[float], None] | None = None,
                 real: Callable[[], float] | None = None) -> None:
        self.follow_real = follow_real
        self.auto_advance = auto_advance
        self._base = start if start is not None else (VIRTUAL_EPOCH if not follow_real else 0.0)
        self._offset = offset
        self._lock = threading.Lock()
        self.on_advance = on_advance  # told each jump's length (moves the driven flows' clocks)
        self._real = real or time.time  # real time (a test may pass its own)
        self._wakers: list[Callable[[], None]] = []

    @classmethod
    def virtual(cls, start: float | None = None) -> Clock:
        return cls(follow_real=False, auto_advance=True, start=start)

    def now(self) -> float:
        if self.follow_real:
            return self._real() + self._offset
        return self._base + self._offset

    def real(self) -> float:
        """The time every process shares, on which the database's schedule is read: wall
        time (a virtual clock has only its own time, which all engines on it share)."""
        return self._real() if self.follow_real else self._base + self._offset

    @property
    def offset(self) -> float:
        """How far this clock is ahead of `real()`."""
        return self._offset if self.follow_real else 0.0

    def advance(self, seconds: float) -> None:
        """Move time forward (never back). Wakes loops so their timers re-check."""
        if seconds <= 0:
            return
        with self._lock:
            self._offset += seconds
        if self.on_advance is not None:
            self.on_advance(seconds)
        for wake in list(self._wakers):
            wake()

    def set_offset(self, offset: float) -> None:
        """Adopt an offset set elsewhere (`dex time skip` of the flow this process drives)."""
        if offset > self._offset:
            with self._lock:
                self._offset = offset
            for wake in list(self._wakers):
                wake()

    @staticmethod
    def real_monotonic() -> float:
        """Real elapsed time, for rate-limiting I/O polls only — never for a deadline."""
        return time.monotonic()

    def add_waker(self, wake: Callable[[], None]) -> None:
        self._wakers.append(wake)

    def remove_waker(self, wake: Callable[[], None]) -> None:
        if wake in self._wakers:
            self._wakers.remove(wake)


class _ClockSelector(selectors.BaseSelector):
    """Delegates to the default selector; on an idle wait, advances an auto-advance clock."""

    def __init__(self, clock: Clock, busy: Callable[[], int], idle: Callable[[], None]) -> None:
        self._inner = selectors.DefaultSelector()
        self._clock = clock
        self._busy = busy
        self._idle = idle

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if (timeout is None or timeout > 0) and self._busy() == 0:
            self._idle()  # before the loop waits (and before an auto-advance clock jumps)
        if (timeout is not None and timeout > 0 and self._clock.auto_advance
                and self._busy() == 0):
            ready = self._inner.select(0)
            if ready:
                return ready
            self._clock.advance(timeout)
            return []
        return self._inner.select(timeout)

    def close(self) -> None:
        self._inner.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Any:
        return self._inner.get_map()


class ClockEventLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose `time()` is the dex clock."""

    def __init__(self, clock: Clock, max_threads: int = 32) -> None:
        self.clock = clock
        super().__init__(selector=_ClockSelector(clock, lambda: self._steps.busy, self._on_idle))
        self._steps = StepThreads(self, max_threads)  # handlers' blocking code
        self._executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="dex-exec")
        self.set_default_executor(self._executor)
        self._clock_resolution = 1e-6
        clock.add_waker(self._waker)
        # called when `run` tears the loop down, before it cancels the tasks left (an engine
        # stops the attempts it drives without a task: dexcli.engine.sync_attempt)
        self.teardown: list[Callable[[], None]] = []
        # called when the loop is about to wait with no handler thread busy (an engine commits
        # what ASYNC durability left open: dexcli.engine.batch)
        self.idle: list[Callable[[], None]] = []

    def _on_idle(self) -> None:
        for hook in self.idle:
            try:
                hook()
            except Exception as exc:  # noqa: BLE001 - reported as a callback's error would be
                self.call_exception_handler({"message": "an idle hook failed", "exception": exc})

    def _waker(self) -> None:
        """Wake the loop (from any thread) so its timers re-check after the clock moved."""
        if not self.is_closed():
            self.call_soon_threadsafe(lambda: None)

    def time(self) -> float:
        return self.clock.now()

    def run_in_thread(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run blocking user code on a handler thread (dexcli.engine.step_threads), with the
        caller's context variables; await the returned future.

        While a thread is busy, an auto-advance clock does not jump: sync code takes no
        virtual time.
        """
        return self._steps.submit(fn, args, contextvars.copy_context())

    def thread_waits(self, waiting: bool) -> None:
        """A handler thread blocks until this loop tells it something (a client call nested in
        a step): while it waits it is not busy, so an auto-advancing clock may jump."""
        self._steps.busy += -1 if waiting else 1

    def call_in_thread(self, then: Then, fn: Callable[..., Any], *args: Any) -> None:
        """`run_in_thread` without a future: `then(ok, result or exception)` is called on the
        loop when `fn` returns (as the batch of results is delivered; it must not raise)."""
        self._steps.call(fn, args, contextvars.copy_context(), then)

    def thread_alone(self) -> bool:
        """Whether the calling handler thread's call is the only one handed over (no other
        handler runs or waits for a thread)."""
        return self._steps.busy <= 1 and not self._steps.waiting()

    def abandon_thread(self, worker: Worker) -> None:
        """A handler thread's call is stuck past its deadline: replace the thread (step_threads)."""
        self._steps.abandon(worker)

    def close(self) -> None:
        self.clock.remove_waker(self._waker)
        super().close()
        self._steps.close()
        self._executor.shutdown(wait=False, cancel_futures=True)


def run(coro_factory: Callable[[], Any], clock: Clock) -> Any:
    """Run a coroutine to completion on a fresh ClockEventLoop."""
    loop = ClockEventLoop(clock)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro_factory())
    finally:
        try:
            for stop in loop.teardown:
                stop()
        finally:
            try:
                _cancel_all(loop)
            finally:
                asyncio.set_event_loop(None)
                loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


async def real_pause(seconds: float) -> None:
    """Wait in real time even on an auto-advancing clock: a busy handler thread stops the jump."""
    loop = asyncio.get_running_loop()
    runner = getattr(loop, "run_in_thread", None)
    if runner is None:
        await asyncio.sleep(seconds)
    else:
        await runner(time.sleep, seconds)


def flow_time(clock: Clock, store: Store, flow_id: str) -> float:
    """Now on a flow's clock, its offset read afresh from the database (real time plus it)."""
    return clock.real() + store.flow_offsets([flow_id]).get(flow_id, 0.0)
