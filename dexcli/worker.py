"""Worker and AsyncWorker: Dex's worker facades over the local engine.

An app's bootstrap code carries over: `Worker(registry, ...)` hosts the registry's flows, here
on a local database (`db=`) instead of a Dex server. `start()` drives every runnable flow in
that database, whoever started it (a Client in this or another process, `dex run`), until
`stop()` or `close()` is called from another thread, as the official Worker serves until
stopped; `run(until_idle=True)` (dexcli only) returns once nothing is queued, retrying or
running (on a real-time clock a Wait's timer, a start delay or a flow timeout does not hold
it). Stopped, the attempts it was running are released (INTERRUPTED, runnable again at once).

There is no server: a blob cache has nothing to cache (`blob_cache` is accepted and unused) and
`WorkerOptions` (addresses, pull streams, credentials) have no local meaning, so passing any is
refused. A Worker hosts synchronous handlers only (as the official one, which fails such a step
at dispatch: here the Worker refuses the registry at once); an AsyncWorker runs both, on its
own event loop in a thread of this process, whatever loop awaits it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from dexcli.builder import build_engine
from dexcli.engine import Engine
from dexcli.engine.clock import Clock
from dexcli.sdk.errors import FlowDefinitionError, NotSupportedYetError
from dexcli.sdk.registry import Registry

# Official Worker members that only make sense against a Dex server.
_SERVER_ONLY = {"worker_target", "wait_pull_registered", "pull_reserved_rpc_declines", "pull_registration_state"}


def _async_steps(registry: Registry) -> list[str]:
    return [f"flow {d.flow_type}, step {s.step_type}" for d in registry for s in d.steps.values()
            if s.handler_kind == "async"]


class _Driver:
    """What both workers share: the engine on the database, the lifecycle (created, running,
    idle, stopped, closed) and the stop request, which any thread may make."""

    def __init__(self, what: str, registry: Registry, options: object, db: str | Path | None,
                 clock: Clock | None) -> None:
        if not isinstance(registry, Registry):
            raise TypeError(f"{what} takes a Registry, not {type(registry).__name__}")
        if options is not None:
            raise NotSupportedYetError(f"{what}(options=...): WorkerOptions (server address, pull streams, "
                                       "credentials) have no meaning for a local worker; pass options=None")
        if db is None:
            raise ValueError(f"{what} needs db=PATH: the local database whose flows it runs")
        self.what = what
        self.engine = build_engine(db, flows=registry, clock=clock)
        self.engine.definitions.prepare()  # at start-up, not in the first flows' latency
        self.state = "created"
        self._started = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = threading.Event()
        self._done.set()
        self._wake: Any = None
        self._thread: threading.Thread | None = None

    def begin(self, one_shot: bool) -> None:
        with self._lock:
            if self.state not in ("created", "idle") or (one_shot and self._started):
                raise RuntimeError(f"{self.what} cannot start from state {self.state}"
                                   + (" (start() may be called once)" if self.state == "idle" else ""))
            self._started = self._started or one_shot
            self.state = "running"
            self._done.clear()
            self._thread = threading.current_thread()

    def drive(self, until_idle: bool) -> None:
        """Drive every runnable flow on a fresh loop of the engine's clock, on this thread; the
        drive releases what it leaves (unrecorded, those are retried after their heartbeat
        timeouts)."""
        def waker(wake: Any) -> None:
            self._wake = wake

        try:
            self.engine.drive(None, until=self._stop.is_set, until_idle=until_idle, waker=waker)
        finally:
            with self._lock:
                if self.state == "running":
                    self.state = "idle"
            self._thread = None
            self._done.set()

    def request_stop(self) -> bool:
        """Ask a running drive to end. Returns whether the caller should wait for it."""
        with self._lock:
            if self.state in ("stopped", "closed"):
                return False
            self.state = "stopping"
        self._stop.set()
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: it has ended anyway
                wake()
        return self._thread is not threading.current_thread()

    def wait(self) -> None:
        self._done.wait()

    def stopped(self) -> None:
        with self._lock:
            if self.state != "closed":
                self.state = "stopped"

    def closed(self) -> None:
        with self._lock:
            if self.state == "closed":
                return
            self.state = "closed"
        self.engine.store.close()

    def server_only(self, name: str) -> NotSupportedYetError:
        return NotSupportedYetError(f"{self.what}.{name}: dex runs flows locally, with no Dex server; "
                                    "a local worker has no target or pull registration")


class _Hosted:
    """What Worker and AsyncWorker share: the SDK's constructor shape, the engine, and the
    server-only members refused."""

    def __init__(self, registry: Registry, blob_cache: object, options: object, db: str | Path | None,
                 clock: Clock | None) -> None:
        self.registry = registry
        self.blob_cache = blob_cache
        self.options = options
        self._driver = _Driver(type(self).__name__, registry, options, db, clock)

    @property
    def engine(self) -> Engine:
        return self._driver.engine

    def __getattr__(self, name: str) -> Any:
        if name in _SERVER_ONLY:
            raise self._driver.server_only(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class Worker(_Hosted):
    """Hosts a registry's synchronous flows on a local database: `Worker(registry, db="dex.db")`.

    `start()` blocks, driving every runnable flow, until `stop()` or `close()` (from another
    thread); it may be called once, as the official Worker's. `run(until_idle=True)` drives
    until nothing is left to run and may be called again. A context manager: leaving closes it.
    """

    def __init__(self, registry: Registry, blob_cache: object = None, options: object = None, *,
                 db: str | Path | None = None, clock: Clock | None = None) -> None:
        refused = _async_steps(registry) if isinstance(registry, Registry) else []
        if refused:
            raise FlowDefinitionError([f"{where}: execute is async; use AsyncWorker for async handlers"
                                       for where in refused])
        super().__init__(registry, blob_cache, options, db, clock)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, exception_type: type[BaseException] | None, exception: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        """Drive every runnable flow until stop() or close() is called from another thread."""
        self._driver.begin(one_shot=True)
        self._driver.drive(until_idle=False)

    def run(self, *, until_idle: bool = False) -> None:
        """Drive every runnable flow: until stop()/close(), or with `until_idle` until nothing is
        queued, retrying or running. (dexcli only; `start()` is the official call.)"""
        self._driver.begin(one_shot=False)
        self._driver.drive(until_idle=until_idle)

    def stop(self) -> None:
        """End the drive (its running attempts are released) and wait for it. Safe before start
        and when repeated."""
        if self._driver.request_stop():
            self._driver.wait()
        self._driver.stopped()

    def close(self) -> None:
        """Stop, then close the database. Idempotent; a closed worker cannot start again."""
        try:
            self.stop()
        finally:
            self._driver.closed()


class AsyncWorker(_Hosted):
    """Hosts a registry's flows, async handlers included, on a local database:
    `AsyncWorker(registry, db="dex.db")`. `await start()` drives every runnable flow until
    `await stop()` / `await close()`; the drive runs on its own loop in a thread, so awaiting
    it never blocks the caller's loop. `await run(until_idle=True)` as Worker.run."""

    def __init__(self, registry: Registry, blob_cache: object = None, options: object = None, *,
                 db: str | Path | None = None, clock: Clock | None = None) -> None:
        super().__init__(registry, blob_cache, options, db, clock)

    async def __aenter__(self) -> AsyncWorker:
        return self

    async def __aexit__(self, exception_type: type[BaseException] | None, exception: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def _drive(self, one_shot: bool, until_idle: bool) -> None:
        driver = self._driver
        ready = threading.Event()
        failed: list[BaseException] = []

        def in_thread() -> None:
            try:
                driver.begin(one_shot)
            except BaseException as exc:
                failed.append(exc)
                raise
            finally:
                ready.set()
            driver.drive(until_idle)

        try:
            await asyncio.to_thread(in_thread)
        except asyncio.CancelledError:  # the awaiting task was cancelled: the drive ends too
            if ready.is_set() and not failed and driver.request_stop():
                await asyncio.to_thread(driver.wait)
            raise

    async def start(self) -> None:
        """Drive every runnable flow until stop() or close(). May be awaited once."""
        await self._drive(True, False)

    async def run(self, *, until_idle: bool = False) -> None:
        """As Worker.run, awaited (dexcli only)."""
        await self._drive(False, until_idle)

    async def stop(self) -> None:
        """End the drive (its running attempts are released) and wait for it."""
        if self._driver.request_stop():
            await asyncio.to_thread(self._driver.wait)
        self._driver.stopped()

    async def close(self) -> None:
        """Stop, then close the database. Idempotent."""
        try:
            await self.stop()
        finally:
            self._driver.closed()
