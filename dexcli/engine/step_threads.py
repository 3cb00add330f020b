"""Handler threads: blocking user code runs here, never on the event loop.

A pool of long-lived threads shares one queue of calls. The loop hands a call over by
appending it and waking one idle thread, or starting a new one up to the limit, as a
ThreadPoolExecutor would: a call that blocks holds only its own thread, the loop and every
other attempt go on. What is cheaper than `run_in_executor` is the hand-off: no
concurrent.futures Future chained to an asyncio one, and results go back in batches — the
first result of a batch schedules one `call_soon_threadsafe` and every result that arrives
before the loop runs it rides along, so many calls ending together wake the loop once.

A thread that posts a result with nothing queued is made idle before it wakes the loop, and
parks right after: the loop's next call finds it idle. (Made idle after the wake-up, it was often
not idle yet when the next call of a sequential drive came, which then started another thread:
calls made one after another went round several threads, 4-5 in the sequential bench.)

A call may name a function instead (`call`): it gets (ok, result or exception) on the loop,
straight from the batch's delivery, with no future and no wake-up of its own.

`busy` counts calls handed over whose results the loop has not taken yet (a call whose
awaiting task was cancelled counts until its thread returns). It is only touched on the
loop's thread; an auto-advancing clock does not jump while it is above 0.

A call that blocks past its attempt's deadline holds its thread; the engine `abandon`s that
thread (it no longer counts against the limit, a new one takes the queued calls, and it ends
once its call returns), so other flows keep running. A call runs a chain of steps when each
step's commit leases the next one here (dexcli.engine.sync_attempt): `waiting` tells it
whether other calls wait for a thread meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

Then = Callable[[bool, Any], None]  # told on the loop: (True, result) or (False, exception)
_Target = asyncio.Future[Any] | Then
_Call = tuple[Callable[..., Any], tuple[Any, ...], contextvars.Context, _Target]
_local = threading.local()


def on_handler_thread() -> bool:
    """Whether this thread is a handler thread (its call counts in some loop's `busy`)."""
    return getattr(_local, "handler", False)


Worker = int  # a handler thread, as the pool knows it: its thread id


def current_worker() -> Worker | None:
    """The handler thread this code runs on (None elsewhere)."""
    return threading.get_ident() if on_handler_thread() else None


class StepThreads:
    def __init__(self, loop: asyncio.AbstractEventLoop, max_threads: int, name: str = "dex-step") -> None:
        self._loop = loop
        self._max = max_threads
        self._name = name
        self._calls: deque[_Call] = deque()
        self._lock = threading.Lock()  # guards _idle, _threads, _done, _closed
        self._idle: list[threading.Lock] = []  # each idle thread parks on its own (held) lock
        self._threads = 0
        self._done: list[tuple[_Target, bool, Any]] = []
        self._closed = False
        self._abandoned: set[Worker] = set()  # stuck threads no longer counted: they end after their call
        self.busy = 0

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], ctx: contextvars.Context) -> asyncio.Future[Any]:
        """Run `ctx.run(fn, *args)` on a handler thread; the future resolves on the loop."""
        future = self._loop.create_future()
        self.call(fn, args, ctx, future)
        return future

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], ctx: contextvars.Context,
             then: _Target) -> None:
        """Run `ctx.run(fn, *args)` on a handler thread; `then` (a future, or a function given
        (ok, value)) gets its outcome on the loop."""
        self.busy += 1
        self._calls.append((fn, args, ctx, then))
        with self._lock:
            if self._idle:
                self._idle.pop().release()
                return
            if self._threads >= self._max:
                return  # a busy thread takes it when its call ends
            self._threads += 1
        park = threading.Lock()
        park.acquire()
        self._spawn(park)

    def _spawn(self, park: threading.Lock) -> None:
        threading.Thread(target=self._work, args=(park,), name=f"{self._name}-{self._threads}",
                         daemon=True).start()

    def waiting(self) -> bool:
        """Whether calls wait for a thread (the pool is busy with other work)."""
        return bool(self._calls)

    def abandon(self, worker: Worker) -> None:
        """`worker`'s call is stuck (its attempt timed out): it stops counting against the
        limit, a new thread takes the queued calls, and it ends when its call returns."""
        with self._lock:
            if worker in self._abandoned or self._closed:
                return
            self._abandoned.add(worker)
            self._threads -= 1
            if not self._calls or self._idle or self._threads >= self._max:
                return
            self._threads += 1
        park = threading.Lock()
        park.acquire()
        self._spawn(park)

    def _work(self, park: threading.Lock) -> None:
        _local.handler = True
        worker = threading.get_ident()
        calls = self._calls
        while True:
            try:
                fn, args, ctx, then = calls.popleft()
            except IndexError:
                with self._lock:
                    if self._closed:
                        self._threads -= 1
                        return
                    if calls:
                        continue  # queued after the popleft above
                    self._idle.append(park)
                park.acquire()  # until submit (or close) releases it
                continue
            try:
                result: tuple[_Target, bool, Any] = (then, True, ctx.run(fn, *args))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                result = (then, False, exc)
            del fn, args, ctx, then  # a parked thread keeps nothing of its last call alive
            # post the result; with nothing queued, this thread is idle before the wake-up it sends
            # (the loop's next call finds it) and parks right after
            with self._lock:
                self._done.append(result)
                first = len(self._done) == 1
                abandoned = worker in self._abandoned  # replaced while its call was stuck
                park_now = not (calls or abandoned or self._closed)
                if park_now:
                    self._idle.append(park)
                elif abandoned:
                    self._abandoned.discard(worker)
            del result
            if first:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                    self._loop.call_soon_threadsafe(self._deliver)
            if abandoned:
                return
            if park_now:
                park.acquire()  # until submit (or close) releases it

    def _deliver(self) -> None:
        with self._lock:
            done, self._done = self._done, []
        self.busy -= len(done)
        for future, ok, value in done:
            if not isinstance(future, asyncio.Future):
                future(ok, value)  # it must not raise (SyncAttempt does not)
                continue
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
                continue
            try:
                future.set_exception(value)
            except TypeError as exc:  # StopIteration cannot be set on a future
                future.set_exception(exc)

    def close(self) -> None:
        """Idle threads end now, busy ones after their call; queued calls are dropped."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        self._calls.clear()
        for park in idle:
            park.release()
