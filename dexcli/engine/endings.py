"""How an attempt's end is committed, and what follows each commit.

An ended attempt is judged (dexcli.engine.outcome) into a decision, a committed wait or a
failure. Here each becomes one group-commit unit (dexcli.engine.batch): its `apply` runs the
transition inside the shared transaction, its `done` runs right after COMMIT and reports it —
the events, the attempts its commit leased (they start now), the steps it cancelled (their
attempts here are fenced) and the flow it closed. Nothing is reported before its commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from dexcli.engine import transitions as t
from dexcli.engine.attempt import STOPPING, AttemptRun
from dexcli.engine.batch import GroupCommit, Unit
from dexcli.engine.definitions import Definitions
from dexcli.engine.events import Emitter
from dexcli.engine.faults import Faults
from dexcli.engine.outcome import WaitResult
from dexcli.engine.schedule import Scheduler
from dexcli.engine.transitions import waiting as w
from dexcli.store import FlowState

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class EndingsHooks:
    """What the endings of attempts need of the engine: collaborators and callbacks."""

    faults: Faults
    commits: GroupCommit
    events: Emitter
    definitions: Definitions
    scheduler: Scheduler
    stats: dict[str, int]
    offsets: dict[str, float]  # flow id -> its clock offset (the engine's)
    runs: dict[tuple[str, str], AttemptRun]  # the attempts running here (the engine's)
    now: Callable[[str], float]
    start_attempt: Callable[[t.Leased, float], None]  # an attempt a commit leased here starts
    runs_of: Callable[[str], list[AttemptRun]]  # a flow's attempts running here


class Endings:
    def __init__(self, hooks: EndingsHooks) -> None:
        self.h = hooks

    def unit(self, run: AttemptRun, verdict: t.Decision | WaitResult | t.Failure | None) -> Unit[Any] | None:
        """The group-commit unit that ends an attempt judged so (None: nothing to commit)."""
        if isinstance(verdict, t.Failure):
            return self._failure_unit(run, verdict)
        if isinstance(verdict, WaitResult):
            return self._wait_unit(run, verdict)
        if verdict is None:
            return None
        self.h.faults.hit("before-commit", run.spec.step_type, where=run.where)
        return self._decision_unit(run, verdict)

    async def commit(self, run: AttemptRun, unit: Unit[Any]) -> None:
        """End an attempt with one unit of the group commit. Its pending outputs were queued
        before it, so they commit first (in the same transaction or an earlier one). A fenced
        attempt — a stale owner, a closed flow — is left out and nothing of it is applied."""
        try:
            await self.h.commits.submit(unit)
        except t.Fenced:
            self.not_owned(run)
        except asyncio.CancelledError:
            run.fence(run.fenced or STOPPING)  # cancelled before its commit: skipped
            raise

    @staticmethod
    def not_owned(run: AttemptRun) -> None:
        run.fence("step no longer owned (flow closed or attempt taken over)")

    def _unit(self, apply: Callable[[Any], R], done: Callable[[R], None], durable: bool = True) -> Unit[R]:
        def committed(result: R) -> None:
            self.h.stats["transitions"] += 1
            done(result)

        return Unit(apply, committed, durable=durable)

    def counted(self) -> None:
        """A transition committed outside a unit (on a handler thread, dexcli.engine.sync_attempt)."""
        self.h.stats["transitions"] += 1

    def _decision_unit(self, run: AttemptRun, decision: t.Decision) -> Unit[Any]:
        apply, done = self.decision(run, decision)
        # ASYNC durability (the method's, or its flow's FlowConfig): acknowledged before it is persistent
        return Unit(apply, done, durable=run.leased.durability != "ASYNC")

    def decision(self, run: AttemptRun, decision: t.Decision
                 ) -> tuple[Callable[[Any], t.ExecuteDone], Callable[[t.ExecuteDone], None]]:
        """A decision's write (inside a transaction) and what follows its commit (reported,
        counted). A unit's parts on the loop; a handler thread commits it itself."""
        h = self.h
        owner = h.scheduler.owner if h.scheduler.drives(run.flow_id) else None

        def apply(tx: Any) -> t.ExecuteDone:
            return t.complete_execute(tx, run.attempt_key, run.step, run.started, decision, run.effects,
                                      h.definitions, run.definition, h.now(run.flow_id), owner)

        def committed(d: t.ExecuteDone) -> None:
            h.stats["transitions"] += 1
            now, c = h.now(run.flow_id), d.completed
            if h.events.listeners:
                h.events.emit("stepCompleted", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                            attempt=run.attempt, duration=now - run.started, decision=c.summary)
            if c.closed is not None:
                self.after_close(run.flow_id, c.closed, ending=run)
            if c.continued is not None:
                h.events.emit("flowContinuedAsNew", run.flow_id, runId=c.continued.run_id,
                              previousRunId=c.continued.previous_run_id, reason=c.continued.reason)
            if d.canceled:
                self.fence_steps(run.flow_id, d.canceled, "cancelled by " + run.seid)
            for leased in c.leased:  # leased in the commit above: their attempts start now
                h.start_attempt(leased, now)
            if d.woken:
                self.after_woken(run.flow_id, d.woken)
            h.faults.hit("after-commit", run.spec.step_type, where=run.where)
            # every step it created runs here already: nothing new is due for the scheduler
            run.handed_on = bool(c.leased) and not d.woken and c.created == len(c.leased)
            h.scheduler.wake(for_stop_only=run.handed_on)

        return apply, committed

    def _wait_unit(self, run: AttemptRun, result: WaitResult) -> Unit[Any]:
        h = self.h
        owner = h.scheduler.owner if h.scheduler.drives(run.flow_id) else None

        def apply(tx: Any) -> w.Waited:
            return w.commit_wait(tx, run.attempt_key, run.step, result.wait, run.started, run.effects,
                                 h.definitions, h.now(run.flow_id), owner, result.children)

        def done(waited: w.Waited) -> None:
            h.events.emit("stepWaiting", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                          wait=result.wait)
            for child in waited.children:  # driven wherever the parent is
                if child.terminated is not None:
                    self.after_close(child.flow_id, child.terminated)
                if owner is not None:
                    h.scheduler.adopt(child.flow_id)
                h.events.emit("subFlowStarted", run.flow_id, stepExecutionId=run.seid, subFlowId=child.flow_id,
                              subFlowIndex=child.index, how=child.how)
            self.after_woken(run.flow_id, (waited.woken,) if waited.woken else ())
            h.scheduler.wake()

        return self._unit(apply, done)

    def _failure_unit(self, run: AttemptRun, failure: t.Failure) -> Unit[Any]:
        h = self.h

        def apply(tx: Any) -> t.Failed:
            return t.fail(tx, run.step, h.scheduler.owner, failure, h.definitions, h.now(run.flow_id))

        return self._unit(apply, lambda failed: self.after_failure(
            run.flow_id, run.seid, run.spec.step_type, run.attempt, failure, failed))

    # ------------------------------------------------------------------ after a commit -----
    def after_woken(self, flow_id: str, woken: tuple[w.Woken, ...] | list[w.Woken]) -> None:
        """Waits a commit completed: report them; start the attempts it leased."""
        h = self.h
        now = h.now(flow_id)
        for x in woken:
            h.events.emit("waitCompleted", flow_id, stepExecutionId=x.step_execution_id,
                        conditionResults=x.condition_results)
            if x.leased is not None:
                h.start_attempt(x.leased, now)

    def fence_steps(self, flow_id: str, seids: tuple[str, ...] | list[str], reason: str) -> None:
        """Step executions another commit cancelled: stop their attempts running here."""
        for seid in seids:
            run = self.h.runs.get((flow_id, seid))
            if run is not None:
                run.fence(reason)
                run.cancel()
            self.h.events.emit("stepCanceled", flow_id, stepExecutionId=seid, reason=reason)

    def after_failure(self, flow_id: str, seid: str, step_type: str, attempt: int, failure: t.Failure,
                      failed: t.Failed) -> None:
        detail = {"nextAttemptAt": failed.next_attempt_at, "delay": failed.delay} if failed.retry else \
            {"reason": failed.reason, "recoveryStepExecutionId": failed.recovery_step_execution_id}
        h = self.h
        h.events.emit("attemptFailed", flow_id, stepExecutionId=seid, stepType=step_type, attempt=attempt,
                    errorType=failure.error_type, detail=failure.detail, outcome=failure.outcome.value,
                    retry=failed.retry, **detail)
        if failed.closed is not None:
            self.after_close(flow_id, failed.closed)
        h.scheduler.wake()

    def after_close(self, flow_id: str, closed: t.Closed, ending: AttemptRun | None = None) -> None:
        """The flow closed in a commit of this process: its attempts here are fenced and cancelled
        (but `ending`, the attempt whose committed decision closed it: it ends as it is)."""
        h = self.h
        h.stats["flows_closed"] += 1
        again = h.scheduler.closed(flow_id, failed=closed.status is FlowState.FAILED)  # a flow retry's new run
        for run in h.runs_of(flow_id):
            if run is ending:
                continue
            run.fence(f"flow {closed.status.value}")
            run.cancel()
        h.events.emit("flowClosed", flow_id, status=closed.status.value, errorType=closed.error_type,
                    errorMessage=closed.message)
        if again is not None:
            h.events.emit("flowRetried", flow_id, runId=again.run_id, attempt=t.flow_retry.attempt_of(again))
        h.offsets.pop(flow_id, None)  # kept per flow, a long-lived worker's memory would grow with each
