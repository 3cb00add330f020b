"""`dex doctor`: check the database's invariants and name every breach.

  - attempts of a step are numbered 1..n with no gap (after the old run's, for a step execution
    a time travel queued again: TimeTravelFork's attemptsBefore); only the last may be RUNNING, and it is
    RUNNING exactly when the step is; a step with wait_for runs its WAIT_FOR attempts first
    (1..method_base once execute is queued) and at most one of them COMPLETED, its last (the
    Wait it returned); a COMPLETED step has one COMPLETED EXECUTE attempt, its last;
  - no decision applied twice: at most one StepExecuteCompleted per step execution, and every
    step execution other than the start step was created by a recorded decision or failure;
  - counts match history: COMPLETED steps = StepExecuteCompleted events, FAILED steps =
    StepExecuteFailed events (StepWaitForFailed for a step whose wait_for failed it), one
    FlowClosed exactly when the flow is closed;
  - a closed flow has nothing queued or running; a RUNNING flow has something queued,
    running or backing off, unless every branch dead-ended (or it has no start step and no RPC
    has started one yet);
  - no synced attribute's projection was given up (FAILED: its Attribute Store failed every
    write for about an hour; the value is kept and is written when a dex process next opens
    the stores);
  - and first, that SQLite finds the file whole (`PRAGMA quick_check`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from dexcli.store import AttemptOutcome as Outcome
from dexcli.store import AttemptRecord, FlowRecord, Method, StepRecord, StepState, Store
from dexcli.store.attribute_outbox import FAILED, of_flow

Event = tuple[str, dict[str, Any]]  # (type, payload)


def check_flow(store: Store, flow: FlowRecord) -> list[str]:
    fid = flow.flow_id
    steps = store.steps_of(fid)
    attempts: dict[str, list[AttemptRecord]] = {}
    for a in store.attempts_of(fid):
        attempts.setdefault(a.step_execution_id, []).append(a)
    history = [(e.type, json.loads(e.payload)) for e in store.history_of(fid)]
    def per_step(kind: str) -> Counter[str]:
        return Counter(p["stepExecutionId"] for t, p in history if t == kind)
    counts = _Counts(per_step("StepExecuteCompleted"), per_step("StepExecuteFailed"),
                     per_step("StepWaitForFailed"), _created(history))
    problems: list[str] = []
    forks = [p for t, p in history if t == "TimeTravelFork"]
    before: dict[str, int] = forks[-1].get("attemptsBefore", {}) if forks else {}
    for s in steps:
        problems += _check_step(f"{fid} {s.step_execution_id}", s,
                                sorted(attempts.get(s.step_execution_id, []), key=lambda a: a.attempt), counts,
                                before.get(s.step_execution_id, 0))
    return problems + _check_closing(flow, steps, history) + _check_projections(store, fid)


def _check_projections(store: Store, fid: str) -> list[str]:
    return [f"{fid}: Attribute Store projection of {r.key!r} {r.error or 'given up'}"
            for r in store.read(lambda tx: of_flow(tx.c, fid)) if r.status == FAILED]


@dataclass(frozen=True)
class _Counts:
    completed: Counter[str]  # StepExecuteCompleted events per step execution
    failed: Counter[str]  # StepExecuteFailed events per step execution
    wait_failed: Counter[str]  # StepWaitForFailed events per step execution
    created: set[str]  # step executions a start, decision, failure or RPC created


def _created(history: list[Event]) -> set[str]:
    """The step executions a start, a decision, a failure or an RPC created, or the run's
    continue-as-new carried."""
    created: set[str] = set()
    for type_, p in history:
        if type_ == "FlowStarted":
            created.add(p.get("startStepExecutionId", ""))
        elif type_ == "StepExecuteCompleted":
            created.update(n["stepExecutionId"] for n in p["decision"].get("next", []))
        elif type_ == "StepExecuteFailed" and p.get("recoveryStepExecutionId"):
            created.add(p["recoveryStepExecutionId"])
        elif type_ == "RpcExecutionCompleted":
            created.update(p.get("nextSteps", []))
        elif type_ == "TimeTravelFork":  # queued again by a time travel (a start step of the code as it is now)
            created.update(p.get("requeued", []))
        elif type_ == "FlowContinued":  # carried from the run before (continue-as-new)
            created.update(s["stepExecutionId"] for s in p.get("stepsToStart", []) + p.get("stepsToResume", []))
    return created


def _check_step(where: str, s: StepRecord, atts: list[AttemptRecord], counts: _Counts, before: int) -> list[str]:
    problems = _check_attempts(where, s, atts, before)
    seid, status = s.step_execution_id, s.status.value
    completed, wait_failed = counts.completed[seid], counts.wait_failed[seid]
    # a wait_for that failed for good fails the step (StepWaitForFailed) unless its policy
    # proceeded to execute, which then fails it as any execute does (StepExecuteFailed)
    failed = wait_failed if s.method is Method.WAIT_FOR else counts.failed[seid]
    if completed > 1:
        problems.append(f"{where}: decision applied {completed} times")
    if wait_failed > 1:
        problems.append(f"{where}: wait_for failed {wait_failed} times")
    if (s.status is StepState.COMPLETED) != (completed == 1):
        problems.append(f"{where}: status {status} but {completed} StepExecuteCompleted events")
    if (s.status is StepState.FAILED) != (failed == 1):
        event = "StepWaitForFailed" if s.method is Method.WAIT_FOR else "StepExecuteFailed"
        problems.append(f"{where}: status {status} but {failed} {event} events")
    if seid not in counts.created:
        problems.append(f"{where}: no recorded decision or failure created this step execution")
    return problems


def _check_attempts(where: str, s: StepRecord, atts: list[AttemptRecord], before: int = 0) -> list[str]:
    """`before`: the attempts a step execution queued again by a time travel had in the old run
    (its attempts here number after them)."""
    problems: list[str] = []
    status = s.status.value
    nums = [a.attempt for a in atts]
    if nums != list(range(before + 1, before + len(nums) + 1)):
        problems.append(f"{where}: attempts are numbered {nums}, not {before + 1}..{before + len(nums)}")
    if s.attempt != before + len(nums):
        problems.append(f"{where}: step says attempt {s.attempt} but {len(nums)} attempt records exist")
    running = [a.attempt for a in atts if a.outcome is Outcome.RUNNING]
    if s.status is StepState.RUNNING:
        if running != ([nums[-1]] if nums else []) or not running:
            problems.append(f"{where}: step is RUNNING but its running attempts are {running}")
    elif running:
        problems.append(f"{where}: step is {status} but attempts {running} are still RUNNING")
    waits = [a for a in atts if a.method == Method.WAIT_FOR.value]
    executes = [a for a in atts if a.method != Method.WAIT_FOR.value]
    # the wait_for attempts are exactly those before execute was queued (method_base)
    wait_nums = [a.attempt for a in waits]
    expected = nums if s.method is Method.WAIT_FOR else [n for n in nums if n <= s.method_base]
    if wait_nums != expected:
        problems.append(f"{where}: wait_for attempts are {wait_nums}, expected {expected}")
    wait_done = [a.attempt for a in waits if a.outcome is Outcome.COMPLETED]
    if wait_done and (len(wait_done) != 1 or wait_done[0] != wait_nums[-1]):
        problems.append(f"{where}: wait_for has completed attempts {wait_done} of {wait_nums}")
    done = [a.attempt for a in executes if a.outcome is Outcome.COMPLETED]
    if s.status is StepState.COMPLETED and (len(done) != 1 or done[0] != nums[-1]):
        problems.append(f"{where}: COMPLETED step has completed execute attempts {done} of {nums}")
    if s.status is not StepState.COMPLETED and done:
        problems.append(f"{where}: {status} step has a COMPLETED execute attempt {done}")
    if s.status is StepState.BACKOFF and atts and \
            atts[-1].outcome not in (Outcome.FAILED, Outcome.TIMED_OUT, Outcome.LOST):
        problems.append(f"{where}: BACKOFF step's last attempt is {atts[-1].outcome.value}")
    return problems


def _check_closing(flow: FlowRecord, steps: list[StepRecord], history: list[Event]) -> list[str]:
    fid, status = flow.flow_id, flow.status.value
    problems: list[str] = []
    closes = [p for t, p in history if t == "FlowClosed"]
    open_steps = [s.step_execution_id for s in steps if s.status.is_open]
    if flow.is_running:
        if closes:
            problems.append(f"{fid}: RUNNING but history has FlowClosed")
        dead_ends = all(_kind(s) == "deadEnd" for s in steps if s.status is StepState.COMPLETED and _kind(s) != "goTo")
        idle_from_start = not steps and any(t == "FlowStarted" and "startStepExecutionId" not in p
                                            for t, p in history)  # no start step, no RPC has started one
        if not open_steps and not idle_from_start and not (steps and dead_ends and not flow.graceful):
            problems.append(f"{fid}: RUNNING with nothing queued, running or backing off")
        return problems
    if len(closes) != 1:
        problems.append(f"{fid}: {status} but {len(closes)} FlowClosed events")
    elif closes[0]["flowStatus"] != status:
        problems.append(f"{fid}: status {status} but FlowClosed says {closes[0]['flowStatus']}")
    if open_steps:
        problems.append(f"{fid}: {status} but steps are still open: {', '.join(open_steps)}")
    return problems


def _kind(step: StepRecord) -> Any:
    return json.loads(step.decision or "{}").get("kind")


def check(store: Store, flow_id: str | None = None) -> tuple[list[str], int]:
    """The breaches of these invariants, and how many flows were checked. A file damaged below
    them (a page, an index no read of the flows touches) raises DamagedDatabaseError first."""
    store.check_integrity()
    flows = [store.get_flow(flow_id)] if flow_id else store.list_flows(limit=10**9)
    problems: list[str] = []
    for f in flows:
        if f is not None:
            problems.extend(check_flow(store, f))
    return problems, len([f for f in flows if f is not None])
