"""Drives asked for while the engine already runs: a client call made from a step handler
(the parent-child pattern: a step starts a child and waits for it), from another thread, or
from async code on the engine's own loop.

Such a call must not start a second loop over the same engine. It becomes a `Waiter`: its
flows join the running loop's scope, its condition is checked on every change (as the loop's
own stop condition is), and its caller is told when it holds, when its deadline passes, or that
the loop ended first. A caller on a handler thread does not hold the clock while it waits: a
virtual or time-skipping clock still jumps when everything else is idle.

`Drives` is where a caller finds the loop: it holds which loop runs the engine, under a lock,
so that two threads that both want to drive never both start one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from dexcli.sdk.errors import DexServiceError

T = TypeVar("T")


class DriveEndedError(DexServiceError):
    """The engine's loop stopped before a nested drive's condition held (its caller, an attempt
    of that loop, was stopped with it)."""


@dataclass(eq=False)
class Waiter:
    flow_ids: frozenset[str] | None  # the flows it needs driven (None: every flow)
    until: Callable[[], bool]
    deadline: float | None  # on the engine's clock; the condition holds once it passes
    tell: Callable[[BaseException | None], None]  # called on the loop: None when its condition held
    holds_thread: bool  # its caller is a handler thread, counted busy until it waits here
    outside: bool  # its caller is no attempt of this engine: the loop goes on until it is told
    done: bool = field(default=False)

    def finish(self, error: BaseException | None) -> None:
        if not self.done:
            self.done = True
            self.tell(error)


class LoopGoneError(Exception):
    """What a call handed to the loop is told when the loop ended before it ran."""


class Drives:
    """Which loop runs the engine now, and how a caller on another thread hands it work."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None
        self._starting: int | None = None  # a thread about to run the loop (claimed, not yet begun)
        self._accept: Callable[[Waiter], None] | None = None
        # handed to the loop and not yet run there: told LoopGoneError if the loop ends first
        self._pending: dict[int, Callable[[BaseException], None]] = {}
        self._next = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._loop

    def on_loop_thread(self) -> bool:
        return self._thread is not None and self._thread == threading.get_ident()

    def claim(self) -> bool:
        """Whether this thread may run the loop itself (nobody runs it, nobody is starting it);
        if so, it is starting it until `begin` or `release`."""
        with self._lock:
            if self._loop is None and self._starting in (None, threading.get_ident()):
                self._starting = threading.get_ident()
                return True
            return False

    def release(self) -> None:
        with self._lock:
            if self._starting == threading.get_ident():
                self._starting = None
                self._lock.notify_all()

    def begin(self, loop: asyncio.AbstractEventLoop, accept: Callable[[Waiter], None]) -> None:
        """run() started on `loop`: waiters go to `accept` (called on that loop)."""
        with self._lock:
            self._loop, self._thread, self._accept = loop, threading.get_ident(), accept
            if self._starting == self._thread:
                self._starting = None
            self._lock.notify_all()

    def end(self) -> None:
        """run() is over: what was handed to it and never ran there is told so."""
        with self._lock:
            self._loop = self._thread = self._accept = None
            pending, self._pending = list(self._pending.values()), {}
            self._lock.notify_all()
        for gone in pending:
            gone(LoopGoneError())

    def settle(self, timeout: float) -> None:
        """Wait (a real, short time) for a loop that is starting or ending elsewhere."""
        with self._lock:
            self._lock.wait(timeout)

    def call(self, fn: Callable[[], None], gone: Callable[[BaseException], None]) -> bool:
        """Run `fn` on the running loop (from another thread); `gone` if the loop ends before
        it runs. False: no loop runs now."""
        with self._lock:
            loop = self._loop
            if loop is None:
                return False
            key, self._next = self._next, self._next + 1
            self._pending[key] = gone

            def run() -> None:
                with self._lock:
                    if self._pending.pop(key, None) is None:
                        return  # told LoopGoneError already
                fn()

            try:
                loop.call_soon_threadsafe(run)
            except RuntimeError:  # closed meanwhile
                del self._pending[key]
                return False
            return True

    def hand(self, waiter: Waiter) -> bool:
        """Give a waiter to the running loop from another thread. False: no loop runs (drive
        yourself, or wait for the one starting)."""
        accept = self._accept
        if accept is None:
            return False
        return self.call(lambda: accept(waiter), waiter.finish)

    def on_loop(self, fn: Callable[[], T]) -> T:
        """Run `fn` where the engine's state lives: on its running loop (this thread blocks for
        the result), or here when no loop runs or this is the loop's thread."""
        while True:
            if self._loop is None or self.on_loop_thread():
                return fn()
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            if not self.call(functools.partial(_settle, future, fn), future.set_exception):
                continue
            try:
                return future.result()
            except LoopGoneError:
                continue


def _settle(future: concurrent.futures.Future[T], fn: Callable[[], T]) -> None:
    try:
        future.set_result(fn())
    except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
        future.set_exception(exc)


def thread_waiter(flow_ids: frozenset[str] | None, until: Callable[[], bool], deadline: float | None, *,
                  holds_thread: bool, outside: bool) -> tuple[Waiter, concurrent.futures.Future[None]]:
    """A waiter for a caller blocked on another thread, and the future it blocks on."""
    future: concurrent.futures.Future[None] = concurrent.futures.Future()

    def tell(error: BaseException | None) -> None:
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)

    return Waiter(flow_ids, until, deadline, tell, holds_thread, outside), future


def task_waiter(flow_ids: frozenset[str] | None, until: Callable[[], bool], deadline: float | None, *,
                outside: bool) -> tuple[Waiter, asyncio.Future[None]]:
    """A waiter for a coroutine on the engine's own loop, and the future it awaits."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def tell(error: BaseException | None) -> None:
        if future.done():
            return
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)

    return Waiter(flow_ids, until, deadline, tell, False, outside), future
