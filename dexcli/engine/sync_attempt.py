"""An attempt of a plain sync `execute` handler: run to completion on its handler thread.

Such an attempt needs no task. Its thread call starts from `_start` (one loop pass after
`start_attempt`, where a task's first step would run). When the handler returns, the thread
itself judges the outcome and, for a decision, commits it (`Store.tx`, the store's one
connection under its lock: the serialized commit path — two writer threads measured 11–17k
transactions/s that way against 9–14k with a connection each, whose waits for SQLite's one
write lock go through its sleeping busy handler); when that commit leased the next
step to this process and that step is a plain sync `execute` too, the same thread starts it
and runs its handler at once. No hop to the loop per step: a chain hands back to the loop
only when it ends, or when something else follows a commit (a wait, a failure, a flow
closed, a step of another kind, several next steps). What the loop then does with it is
what it did before: `Back`.

The thread commits only while its call is the only one handed to the handler threads
(`thread_alone`): with other handlers running or queued, the loop's group commit shares one
transaction among their outcomes, which is cheaper than a commit per thread (and commits
outcomes that arrive together in the order they arrive); then the outcome goes back to the
loop as a task's would. Under ASYNC durability the thread's transaction is left open and
shares a commit with the transitions after it (dexcli.engine.async_commits): the chain goes
on at once.

Every rule of the task path holds:

  - SYNC durability: a step's decision is committed before the next step's handler runs (the
    next attempt exists only once the commit that leased it is done);
  - deadlines are watched by the loop (dexcli.engine.watch; a thread arms its attempts'
    watchdogs there itself). A timeout while the handler runs is judged and committed by the
    loop at once; the attempt's thread is replaced (`abandon_thread`) so other flows keep
    their threads, and its late result is refused: judging is claimed once, under a lock —
    whoever comes second (the late thread, or a watchdog after the thread's commit began)
    commits nothing. A commit of a stale owner is refused by the store's fence as well;
  - fault points: attempt-start, `--fail`, `--stall` (no handler call: the watchdog ends it),
    before-commit and after-commit fire where they fire for a task;
  - fenced (lease lost, flow closed, a cancelled step) while it waits for its thread or its
    commit: nothing of it is committed (`GroupCommit.flush` skips a cancelled unit);
  - stopping (the loop's teardown, `Engine.run` cancelled): `halt` waits for commits under way
    on threads, reports them, and ends every other such attempt as a cancelled task ends, so
    `release_interrupted` releases it. A chain does not go on once this process stops.

Only loops with handler threads (`ClockEventLoop.call_in_thread`) take this path; generators,
`wait_for` and async handlers keep their task (their frames and awaits need the loop).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dexcli.engine import transitions as t
from dexcli.engine.attempt import AttemptRun, SyncContext, stalls
from dexcli.engine.batch import GroupCommit, Unit
from dexcli.engine.definitions import Definitions
from dexcli.engine.endings import Endings
from dexcli.engine.events import Emitter
from dexcli.engine.faults import Faults
from dexcli.engine.host import current_flow
from dexcli.engine.outcome import WaitResult, judge
from dexcli.engine.step_threads import Worker, current_worker
from dexcli.sdk.errors import AttemptFencedError
from dexcli.store import Method, Store

_claim = threading.Lock()  # who judges an attempt: its thread, or the loop (a timeout, a fence, a stop)


@dataclass(frozen=True, slots=True)
class SyncHooks:
    """What a sync attempt needs of the engine that runs it: collaborators and callbacks."""

    store: Store
    faults: Faults
    events: Emitter
    definitions: Definitions
    commits: GroupCommit
    endings: Endings
    now: Callable[[str], float]
    started: Callable[[AttemptRun], None]  # attemptStarted reported, its fault point
    interrupted: Callable[[AttemptRun], None]  # cancelled: fenced, or this process stops
    unrecorded: Callable[[AttemptRun, Exception], None]  # its outcome could not be recorded
    ended: Callable[[AttemptRun], None]  # it is over here: forgotten (any thread)
    arm: Callable[[AttemptRun], Any]  # its watchdog armed (any thread); returns its input
    successor: Callable[[t.Leased, Any], AttemptRun | None]  # on a chain's thread: the next attempt
    halting: Callable[[], bool]  # this process stops: no chain goes on
    tidy: Callable[[], None]  # on the loop: deadlines disarmed on threads are dropped (dexcli.engine.watch)


# what the loop does with what a thread hands back (`Back.kind`)
RAW, LOST, VERDICT, FENCED, UNRECORDED, COMMITTED = range(6)


@dataclass(slots=True)
class Back:
    attempt: SyncAttempt
    kind: int
    payload: Any = None


class SyncAttempt:
    """Drives one attempt (its `AttemptRun.driver`): `cancel`, `done` and `cancelling` as a
    task's. While `in_thread` its handler runs (or is about to); `waiting` is its commit's
    future when the loop commits it; `on_thread` while its thread commits it."""

    @staticmethod
    def fits(run: AttemptRun, loop: asyncio.AbstractEventLoop) -> bool:
        return (run.spec.handler_kind == "sync" and run.method is Method.EXECUTE
                and hasattr(loop, "call_in_thread"))

    def __init__(self, hooks: SyncHooks, run: AttemptRun, ctx: contextvars.Context, *, chained: bool = False
                 ) -> None:
        self.hooks = hooks
        self.run = run
        self.ctx = ctx
        self.in_thread = False
        self.worker: Worker | None = None  # the thread its handler runs on
        self.waiting: Unit[Any] | None = None  # its unit, queued for the loop's group commit
        self.judged = False  # its outcome is decided (the handler returned, or it timed out)
        self.on_thread = False  # its thread commits it: `back` is set once that is over
        self.back: Back | None = None  # what its thread handed back, not yet taken by the loop
        self.over = False
        if not chained:  # else its predecessor's thread starts it (`begin_on_thread`)
            assert run.loop is not None
            run.loop.call_soon(self._start, context=ctx)

    def done(self) -> bool:
        return self.over

    def cancelling(self) -> int:
        return 0  # nothing can swallow a cancellation here: `cancel` fences at once

    def cancel(self, msg: Any | None = None) -> bool:
        """The watchdog fired (judge the timeout and commit it now), or it was fenced or this
        process stops: cancel what it waits for; nothing of it is committed. (On the loop.)"""
        if self.over:
            return False
        with _claim:
            judged, on_thread, back = self.judged, self.on_thread, self.back
            self.judged = True  # whatever its thread returns now is refused
            in_thread, self.in_thread = self.in_thread, False
        if on_thread or (back is not None and (back.kind in (COMMITTED, FENCED, UNRECORDED)
                                               or (back.kind == VERDICT and self.run.timed_out is not None))):
            # its thread's commit began first, or it judged a failure before the deadline:
            # that is reported (and the failure committed) on the loop (`_take`) when delivered
            return True
        worker = self.worker
        run = self.run
        if in_thread and worker is not None and run.fenced is not None and run.fenced != "cancelled":
            loop: Any = run.loop  # stuck in its handler: another thread takes the other calls
            loop.abandon_thread(worker)
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            waiting.skip = True  # left out of the group commit
        if not judged and run.timed_out is not None:
            self._judge(judge(run, None, None, self.hooks.definitions, self.hooks.now(run.flow_id)))
        else:
            self.hooks.interrupted(run)
            self._finish()
        return True

    # ------------------------------------------------------------------ on the loop -------
    def _start(self) -> None:
        if self.over:  # cancelled before it began
            return
        hooks, run = self.hooks, self.run
        run.began = True
        current_flow.set(run.flow_id)  # its context (and its thread's): the host's clock is the flow's
        try:
            hooks.started(run)
        except Exception as exc:
            self._unrecorded(exc)
            return
        try:
            value = hooks.arm(run)
            if stalls(run):
                return
            loop: Any = run.loop  # it has call_in_thread (see `fits`)
            self.in_thread = True
            loop.call_in_thread(self._delivered, self._chain, value)
        except (Exception, AttemptFencedError) as exc:
            self.in_thread = False
            self._returned_with(None, exc)

    def _delivered(self, ok: bool, back: Any) -> None:
        """What the thread handed back (called by its delivery: must not raise)."""
        self.hooks.tidy()  # the deadlines its chain disarmed on its thread
        if not ok:  # a bug in the chain itself (or Ctrl-C on that thread): as a task's
            if isinstance(back, Exception):
                self.ctx.run(self._unrecorded, back)
            elif not self.over:
                self.ctx.run(self._took, False, back)
            return
        attempt: SyncAttempt = back.attempt
        attempt.ctx.run(attempt._take, back)

    def _take(self, back: Back) -> None:
        with _claim:
            if self.back is not back:
                return  # taken already (by `halt`)
            self.back = None
        kind, payload = back.kind, back.payload
        if self.over and kind in (RAW, VERDICT):
            return  # cancelled meanwhile (`cancel` ended it): nothing of it is committed
        if kind == RAW:  # the loop judges it, as a task's outcome
            if not self.judged:
                self._took(*payload)
        elif kind == VERDICT:
            self._judge(payload)
        elif kind == COMMITTED:
            done, result = payload
            try:
                done(result)
            except Exception as exc:  # committed, but reporting it failed (a listener)
                self.hooks.unrecorded(self.run, exc)
            finally:
                self._finish()
        elif kind == FENCED:
            Endings.not_owned(self.run)
            self._finish()
        elif kind == UNRECORDED:
            self._unrecorded(payload)
        # LOST: the loop judged it meanwhile (timed out, fenced, stopped): nothing of it here

    def _took(self, ok: bool, value: Any) -> None:
        if ok:
            self._returned_with(value, None)
        elif isinstance(value, (Exception, AttemptFencedError)):
            self._returned_with(None, value)
        elif isinstance(value, asyncio.CancelledError):  # as the task would take it: stopped
            self.hooks.interrupted(self.run)
            self._finish()
        else:  # KeyboardInterrupt, SystemExit in the handler: they end the loop, as from a task
            self._finish()
            assert self.run.loop is not None
            self.run.loop.call_soon(_reraise, value)

    def _returned_with(self, result: Any, error: BaseException | None) -> None:
        self.run.disarm()
        hooks, run = self.hooks, self.run
        try:
            verdict = judge(run, result, error, hooks.definitions, hooks.now(run.flow_id))
        except Exception as exc:
            self.judged = True
            self._unrecorded(exc)
            return
        self._judge(verdict)

    def _judge(self, verdict: t.Decision | WaitResult | t.Failure | None) -> None:
        self.judged = True
        try:
            unit = self.hooks.endings.unit(self.run, verdict)
        except Exception as exc:
            self._unrecorded(exc)
            return
        if unit is None:
            self._finish()
            return
        reported = unit.done

        def done(result: Any) -> None:
            try:
                if reported is not None:
                    reported(result)
            except Exception as exc:  # committed, but reporting it failed (a listener)
                self.hooks.unrecorded(self.run, exc)
            finally:
                self.waiting = None
                self._finish()

        unit.done, unit.failed = done, self._failed
        self.waiting = unit
        self.hooks.commits.queue(unit)  # no future: its done or failed tells

    def _failed(self, error: BaseException) -> None:
        if self.waiting is None or self.waiting.skip:  # fenced or stopped before (`cancel` did the rest)
            return
        self.waiting = None
        if isinstance(error, t.Fenced):
            Endings.not_owned(self.run)
        elif isinstance(error, Exception):  # not applied; or committed, but reporting it failed
            self.hooks.unrecorded(self.run, error)
        self._finish()

    def _unrecorded(self, exc: Exception) -> None:
        self.hooks.unrecorded(self.run, exc)
        self._finish()

    def _finish(self) -> None:
        """What the task's `finally` does: its watchdog off, the attempt forgotten. The run
        then points to `ENDED` instead of this driver: the two referring to each other were a
        cycle per attempt that only the garbage collector's rare full passes freed (a long-lived
        worker's memory crept with every flow). (On the loop, or on its thread once handed on.)"""
        if self.over:
            return
        self.over = True
        self.run.disarm()
        self.run.driver = ENDED
        self.hooks.ended(self.run)

    # ------------------------------------------------------------------ on its thread -----
    def _chain(self, value: Any) -> Back:
        """The thread call: this attempt's handler, and each next one its commit leases here."""
        worker = current_worker()
        attempt: SyncAttempt = self
        while True:
            attempt.worker = worker
            # the first runs in the copy of its context the thread call got; each next in its own
            step = attempt._on_thread(value) if attempt is self else attempt.ctx.run(attempt._on_thread, value)
            if isinstance(step, Back):
                with _claim:
                    return _keep(step)
            attempt, value = step

    def _on_thread(self, value: Any) -> Back | tuple[SyncAttempt, Any]:
        with _claim:
            if self.judged or self.over:  # timed out or fenced before its handler began
                return Back(self, LOST)
            self.in_thread = True
        run = self.run
        try:
            result: tuple[bool, Any] = (True, run.spec.instance.execute(SyncContext(run), value))
        except BaseException as exc:  # noqa: BLE001 - judged, or handed to the loop as a task's
            result = (False, exc)
        return self._after_handler(*result)

    def _after_handler(self, ok: bool, value: Any) -> Back | tuple[SyncAttempt, Any]:
        run, hooks = self.run, self.hooks
        loop: Any = run.loop
        here = (ok or isinstance(value, (Exception, AttemptFencedError))) and loop.thread_alone() \
            and not hooks.halting()
        with _claim:
            if self.judged or self.over:
                return Back(self, LOST)  # a late outcome: refused (the loop judged it meanwhile)
            self.in_thread = False
            if not here:
                return _keep(Back(self, RAW, (ok, value)))
            self.judged = self.on_thread = True
        out: Back | tuple[SyncAttempt, Any] = Back(self, UNRECORDED, RuntimeError("no outcome"))
        try:
            out = self._commit_here(value if ok else None, None if ok else value)
        except Exception as exc:  # a bug here: reported as this attempt's
            out = Back(self, UNRECORDED, exc)
        finally:
            with _claim:
                if isinstance(out, Back):
                    _keep(out)
                self.on_thread = False
        return out

    def _commit_here(self, result: Any, error: BaseException | None) -> Back | tuple[SyncAttempt, Any]:
        run, hooks = self.run, self.hooks
        run.disarm()
        try:
            verdict = judge(run, result, error, hooks.definitions, hooks.now(run.flow_id))
        except Exception as exc:
            return Back(self, UNRECORDED, exc)
        if verdict is None or isinstance(verdict, (t.Failure, WaitResult)):
            return Back(self, VERDICT, verdict)  # the loop commits it, and what follows
        try:
            hooks.faults.hit("before-commit", run.spec.step_type, where=run.where)
            apply, done = hooks.endings.decision(run, verdict)
            with hooks.commits.deferrals.tx(run.leased.durability) as tx:  # ASYNC: left open (async_commits)
                executed: t.ExecuteDone = apply(tx)
        except t.Fenced:
            return Back(self, FENCED)
        except Exception as exc:
            return Back(self, UNRECORDED, exc)
        nxt = self._hand_on(executed)
        if nxt is None:
            return Back(self, COMMITTED, (done, executed))
        value = nxt.ctx.run(nxt._begin)
        return value if isinstance(value, Back) else (nxt, value)

    def _hand_on(self, executed: t.ExecuteDone) -> SyncAttempt | None:
        """After its commit: the next attempt, when this commit leased exactly one next step,
        of the same kind, and nothing else follows it; reported here as the loop would."""
        c = executed.completed
        if (c.closed is not None or c.continued is not None or executed.canceled or executed.woken
                or len(c.leased) != 1 or c.created != 1 or self.hooks.halting()):  # the loop reports those
            return None
        hooks, run = self.hooks, self.run
        if hooks.events.listeners:
            hooks.events.emit("stepCompleted", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                              attempt=run.attempt, duration=hooks.now(run.flow_id) - run.started,
                              decision=c.summary)
        nxt = hooks.successor(c.leased[0], run.loop)
        if nxt is None:
            return None  # not a plain sync execute: the loop starts it
        hooks.endings.counted()
        hooks.faults.hit("after-commit", run.spec.step_type, where=run.where)
        run.handed_on = True
        self._finish()
        driver = nxt.driver
        assert isinstance(driver, SyncAttempt)
        return driver

    def _begin(self) -> Any:
        """`_start`, on its predecessor's thread: returns its input, or a Back."""
        hooks, run = self.hooks, self.run
        if self.over:
            return Back(self, LOST)
        run.began = True
        current_flow.set(run.flow_id)
        try:
            hooks.started(run)
        except Exception as exc:
            with _claim:
                self.judged = True
            return Back(self, UNRECORDED, exc)
        try:
            value = hooks.arm(run)
            if stalls(run):
                return Back(self, LOST)  # a stuck worker: the watchdog ends it
        except (Exception, AttemptFencedError) as exc:
            return self._after_handler(False, exc)
        return value


def _keep(back: Back) -> Back:
    """What a thread hands back, kept on its attempt for the loop (or `halt`) to take once.
    (Under `_claim`.)"""
    if back.kind != LOST and back.attempt.back is None:
        back.attempt.back = back
    return back


class _Ended:
    """The driver of an attempt whose callbacks are over (`AttemptRun.driver` after `_finish`)."""

    @staticmethod
    def done() -> bool:
        return True

    @staticmethod
    def cancel(msg: Any | None = None) -> bool:
        return False

    @staticmethod
    def cancelling() -> int:
        return 0


ENDED = _Ended()

HALT_WAIT = 5.0  # seconds (real) a stop waits for a commit under way on a handler thread


def halt(runs: Callable[[], Iterable[AttemptRun]]) -> None:
    """This process stops (its loop is torn down, or `Engine.run` was cancelled; `halting` is
    true from now on): commits under way on handler threads finish and are reported; the other
    callback-driven attempts end as their tasks would be cancelled — those not fenced yet are
    left to `release_interrupted`."""
    for run in list(runs()):
        driver = run.driver
        if isinstance(driver, SyncAttempt):
            waited = 0.0
            while driver.on_thread and waited < HALT_WAIT:  # rare (a stop mid-commit): no Event per attempt
                time.sleep(0.001)
                waited += 0.001
            back = driver.back  # committed (or refused) already: reported; the rest is released
            if back is not None and back.kind in (COMMITTED, FENCED, UNRECORDED):
                driver.ctx.run(driver._take, back)
    for run in list(runs()):  # those just reported may have started attempts: they are stopped too
        if isinstance(run.driver, SyncAttempt):
            run.driver.cancel()


def _reraise(error: BaseException) -> None:
    raise error
