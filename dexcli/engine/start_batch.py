"""The starts an AsyncClient asks for in one event-loop pass, as one unit of the group commit.

Each `AsyncClient.start_flow` (`Engine.start_flow_async`) on the engine's loop joins the open
batch while that batch is the last unit queued for the pass's transaction (so the batch keeps
its place among the other writes queued in the pass); otherwise it opens a new one. The batch's
unit applies its starts with `transitions.start_all`: in their order, the ones of free flow
ids written together, each with its own outcome. A start that raises (a refused flow id, a
second start of one flow id in the batch that its id reuse policy refuses) is undone alone and
its caller gets that error; the others commit. If the transaction itself fails, every start of
the batch gets that error. A caller is answered after COMMIT, after its start's `after` (the
engine's follow-up: the flowStarted event, its first attempt begun).

The cyclic garbage collector is paused from when a batch of starts is applied until its
callers are told (or it failed): what the batch builds (the rows, the step records, the
outcomes) is all alive until then, so a collection in between frees nothing of it; it only
walks the heap, and with 10,000 starts pending that heap is the 10,000 callers' tasks too:
each full collection took 30-90 ms here, two or three per batch of 10,000 (turned back on
right after the batch, it made one more full collection at once, over the batch's outcomes).
The pause spans the batch's statements, the group commit's COMMIT and the engine's follow-up
of each start: no await, no step code on this thread (handler threads go on; what they make
meanwhile is collected after it). Whatever ends the group commit's flush (a failure, a
KeyboardInterrupt in its COMMIT), the unit's `ended` turns the collector back on before the
flush returns or raises. The collector's settings are left as they are: a client runs in its
user's process, whose collector is the user's to tune (gc.freeze or higher thresholds, as a
worker sets them: dexcli.engine.process.tune_gc, would keep that process's objects from ever
being collected, or change how often the user's own garbage is); only a paused-and-resumed
collector, with nothing to free in between, is a safe default for a library.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

from dexcli.engine import transitions as t
from dexcli.engine.batch import GroupCommit, Unit
from dexcli.store import Tx

_Pending = tuple[t.StartRequest, str | None, "asyncio.Future[t.Started]"]  # (request, lease owner, its caller's)
_Outcome = list[tuple[_Pending, t.Started | Exception]]


class StartBatches:
    def __init__(self, commits: GroupCommit, now: Callable[[str], float],
                 after: Callable[[t.StartRequest, t.Started], None]) -> None:
        self._commits = commits
        self._now = now  # the time on a flow's clock
        self._after = after  # after COMMIT, for each start written
        self._unit: Unit[_Outcome] | None = None
        self._pending: list[_Pending] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the open batch's
        self._paused = False  # this batch paused the cyclic GC

    def submit(self, req: t.StartRequest, owner: str | None) -> asyncio.Future[t.Started]:
        """Queue a start in this pass's batch; the future resolves after its COMMIT."""
        loop = self._loop
        if self._unit is None or self._commits.last() is not self._unit or loop is None:
            pending: list[_Pending] = []
            self._pending = pending
            loop = self._loop = asyncio.get_running_loop()  # (a getpid() syscall: once per batch)
            self._unit = Unit(lambda tx: self._apply(tx, pending), self._done,
                              failed=lambda exc: self._failed(pending, exc), ended=self._resume_gc)
            self._commits.queue(self._unit)
        future: asyncio.Future[t.Started] = loop.create_future()
        self._pending.append((req, owner, future))
        return future

    def _apply(self, tx: Tx, pending: list[_Pending]) -> _Outcome:
        live = [p for p in pending if not p[2].cancelled()]  # (applied again if another unit rolls back)
        now = self._now
        if len(live) > 1 and gc.isenabled():  # paused until its outcome is told: see the module's docstring
            gc.disable()
            self._paused = True
        return list(zip(live, t.start_all(tx, [t.Starting(req, now(req.flow_id), owner) for req, owner, _ in live]),
                        strict=True))

    def _resume_gc(self) -> None:
        if self._paused:
            self._paused = False
            gc.enable()

    def _done(self, outcome: _Outcome) -> None:
        try:
            self._tell(outcome)
        finally:
            self._resume_gc()

    def _tell(self, outcome: _Outcome) -> None:
        for (req, _, future), result in outcome:
            if isinstance(result, Exception):
                if not future.done():
                    future.set_exception(result)
                continue
            try:
                self._after(req, result)
            except Exception as exc:  # committed, but reporting it failed (a listener)
                if not future.done():
                    future.set_exception(exc)
                continue
            if not future.done():
                future.set_result(result)

    def _failed(self, pending: list[_Pending], exc: BaseException) -> None:
        self._resume_gc()
        for _, _, future in pending:
            if not future.done():
                future.set_exception(exc)


