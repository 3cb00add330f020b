"""Group commit: writes asked for in the same event-loop pass share one transaction.

Every batched write in dex goes through `GroupCommit`: attempt outcomes, heartbeats and Stream
messages, flow starts from an AsyncClient, and the writes of flow packages (dexcli.host).
A unit is applied inside the transaction; its `done` runs right after COMMIT, before its
future resolves and before anything else runs on the loop. Nothing is acknowledged before
its commit.

If a unit raises, the transaction rolls back, that unit's future gets the exception and the
others are applied again without it (rare: a fenced attempt, a bug). If the transaction
itself fails (a database error), every unit of it fails.

A unit that is not `durable` (a step result under ASYNC durability) is acknowledged before it
is persistent: when every unit of a pass is such, their transaction is applied and reported
but left open (`Store.tx(durable=False)`), and commits with the next durable one, after
ASYNC_BATCH of them, ASYNC_WINDOW seconds (real time) after the first, or when the loop has
nothing else to do (`idle`), whichever comes first (dexcli.engine.async_commits). A crash
before then loses them: those steps run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dexcli.engine.async_commits import ASYNC_BATCH, Deferrals
from dexcli.store import Store, Tx

R = TypeVar("R")


@dataclass
class Unit(Generic[R]):
    """One write: `apply(tx)` inside the transaction; `done(result)` right after COMMIT."""

    apply: Callable[[Tx], R]
    done: Callable[[R], None] | None = None
    future: asyncio.Future[R] | None = None
    durable: bool = True  # False: may be acknowledged before it is committed (ASYNC durability)
    failed: Callable[[BaseException], None] | None = None  # without a future: told what failed it
    skip: bool = False  # without a future: cancelled before its commit (left out, not applied)
    ended: Callable[[], None] | None = None  # when the flush that took it is over, whatever happened


class _Rollback(Exception):
    pass


class GroupCommit:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: list[Unit[Any]] = []
        self.deferrals = Deferrals(store)  # what ASYNC units left open, and its time bound
        self.flushes = 0

    def submit(self, unit: Unit[R]) -> asyncio.Future[R]:
        """Queue a unit for this loop pass's transaction; the returned future resolves once
        it is committed (or fails with what its apply raised)."""
        loop = asyncio.get_running_loop()
        if unit.future is None:
            unit.future = loop.create_future()
        self._enqueue(unit, loop)
        return unit.future

    def queue(self, unit: Unit[Any]) -> None:
        """Queue a unit nobody awaits, on the loop: its `done` (after COMMIT) or its `failed`
        reports the outcome; setting its `skip` before the flush leaves it out. No future."""
        self._enqueue(unit, asyncio.get_running_loop())

    def submit_nowait(self, unit: Unit[Any], loop: asyncio.AbstractEventLoop) -> None:
        """Queue a unit nobody awaits (its `done` reports the outcome); safe from any thread."""
        if loop.is_running() and _running_loop() is not loop:
            loop.call_soon_threadsafe(self._enqueue, unit, loop)
        else:
            self._enqueue(unit, loop)

    def last(self) -> Unit[Any] | None:
        """The unit queued last for this pass's transaction (None once it is flushed): a
        caller that batches its own writes into one unit may add to it while it is last."""
        return self._queue[-1] if self._queue else None

    def _enqueue(self, unit: Unit[Any], loop: asyncio.AbstractEventLoop) -> None:
        self._queue.append(unit)
        if len(self._queue) == 1:
            loop.call_soon(self.flush)

    def idle(self) -> None:
        """Nothing else is left to do on the loop: commit what ASYNC units left open."""
        if self.store.deferred:
            self.commit_deferred()

    def commit_deferred(self) -> None:
        self.store.commit_deferred()

    def flush(self) -> None:
        """Commit everything queued now (also called directly when a drive session ends)."""
        batch = [u for u in self._queue if not u.skip and (u.future is None or not u.future.cancelled())]
        self._queue = []
        ends = [u.ended for u in batch if u.ended is not None]
        try:
            self._flush(batch)
        finally:  # a KeyboardInterrupt in COMMIT too: what a unit holds open until then is let go
            for ended in ends:
                ended()

    def _flush(self, batch: list[Unit[Any]]) -> None:
        while batch:
            try:
                results = self._commit(batch)
            except _Rollback as rb:
                failed, exc = rb.args
                batch.remove(failed)
                _settle(failed, exc)
                continue
            except Exception as exc:  # the transaction itself failed
                for unit in batch:
                    _settle(unit, exc)
                return
            self.flushes += 1
            for unit, result in zip(batch, results, strict=True):
                try:
                    if unit.done is not None:
                        unit.done(result)
                except Exception as exc:  # committed, but reporting it failed (a listener)
                    _settle(unit, exc)
                    continue
                if unit.future is not None and not unit.future.done():
                    unit.future.set_result(result)
            return

    def _commit(self, batch: list[Unit[Any]]) -> list[Any]:
        results: list[Any] = []
        durable = self.store.deferred + 1 >= ASYNC_BATCH or any(u.durable for u in batch)
        with self.store.tx(durable=durable) as tx:
            for unit in batch:
                try:
                    results.append(unit.apply(tx))
                except Exception as exc:
                    raise _Rollback(unit, exc) from None
        if not durable:
            self.deferrals.flusher.deferred()
        return results


def _settle(unit: Unit[Any], exc: BaseException) -> None:
    if unit.future is not None and not unit.future.done():
        unit.future.set_exception(exc)
    elif unit.future is None and unit.failed is not None:
        unit.failed(exc)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
