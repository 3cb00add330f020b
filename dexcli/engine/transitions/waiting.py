"""The state changes of waiting: a Wait committed, a wait woken (ready: messages consumed,
execute queued), messages published, a timer skipped, step executions cancelled, an RPC's
effects applied. Like dexcli.engine.transitions: functions over one transaction that take
facts and `now` and return records; the engine commits them and acts after COMMIT.

    commit_wait   a wait_for attempt's Wait: the step WAITING, timers' firing times fixed, its
                  SubFlows' children started (transitions.subflows)
    wake_step     re-evaluate one waiting step; if ready, consume and queue (or lease) execute
    wake_flow     the same for every waiting step of a flow, in creation order
    publish       staged channel messages appended (UUIDv7 ids), FIFO per queue
    skip_timer    a client makes a pending timer ready now
    cancel        step executions of some types (or siblings) end CANCELED
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from dexcli.engine import waits as w
from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.engine.deadlines import iso
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions.continuing import when_due
from dexcli.engine.transitions.steps import AttemptKey, Fenced, Leased, end_call, lease
from dexcli.engine.transitions.subflows import ChildStart, ChildStarted, start_children
from dexcli.sdk.errors import FlowEndedError, FlowNotActiveOrNotFoundError
from dexcli.sdk.options import ResolvedOptions
from dexcli.store import AttemptOutcome, Runnable, StepRecord, StepState, Tx


class TimerNotFoundError(FlowNotActiveOrNotFoundError):
    """skip_timer named a step execution, or a timer of it, that does not exist (exit 3)."""


class TimerNotPendingError(TimerNotFoundError):
    """skip_timer named a step execution that is not waiting, or a timer that already fired:
    they exist, but not in a state for that (exit 4, as a closed flow)."""

    exit_code = 4


def uuid7() -> str:
    """A time-ordered UUID (version 7), as Dex gives channel messages."""
    ms = int(time.time() * 1000)
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


@dataclass
class Effects:
    """What a handler staged to commit with its result."""

    publishes: list[tuple[str, str]] = field(default_factory=list)  # (queue, value JSON)
    deletes: list[str] = field(default_factory=list)  # message ids (RPCs)
    events: list[dict[str, Any]] = field(default_factory=list)  # record_event
    locals: dict[str, str] | None = None  # step-execution locals (JSON values), when changed
    attributes: dict[str, AttributeWrite] = field(default_factory=dict)  # staged attribute writes, by key

    @property
    def empty(self) -> bool:
        return not (self.publishes or self.deletes or self.events or self.locals is not None or self.attributes)


@dataclass(frozen=True, slots=True)
class Woken:
    """A waiting step whose wait became ready: its execute is queued (and leased, when given)."""

    step_execution_id: str
    condition_results: dict[str, Any]
    leased: Leased | None


@dataclass(frozen=True, slots=True)
class Waited:
    """A committed wait: the step it woke at once (ready already), and its SubFlows' children."""

    woken: Woken | None
    children: tuple[ChildStarted, ...] = ()


# ------------------------------------------------------------------------------ publish -----
def publish(tx: Tx, flow_id: str, messages: list[tuple[str, str]], source: str, now: float) -> list[str]:
    """Append messages to their queues; returns their ids."""
    ids = []
    for queue, value in messages:
        mid = uuid7()
        tx.insert_message(mid, flow_id, queue, value, now, source)
        ids.append(mid)
    return ids


# ------------------------------------------------------------------------------ commit ------
def commit_wait(tx: Tx, key: AttemptKey, step: StepRecord, wait: dict[str, Any], started: float,
                effects: Effects, definitions: Definitions, now: float, owner: str | None,
                children: tuple[ChildStart, ...] = ()) -> Waited:
    """A wait_for attempt returned `wait` (persisted form): the step waits from now, the
    children of its SubFlow conditions start; then it is evaluated at once (it may be ready
    already). Fenced when the attempt is no longer ours."""
    flow = tx.get_flow(key.flow_id)
    if flow is None or not flow.is_running:
        raise Fenced()
    locals_json = None if effects.locals is None else json.dumps(effects.locals)
    text = json.dumps(wait)
    if not tx.wait_step(key.flow_id, key.seid, key.owner, key.attempt, text, now, w.next_timer(wait, now),
                        locals_json):
        raise Fenced()
    kids: tuple[ChildStarted, ...] = ()
    if children:
        kids = tuple(start_children(tx, flow, key.seid, wait, children, now))
        tx.set_wait(key.flow_id, key.seid, json.dumps(wait), w.next_timer(wait, now))
    tx.end_attempt(key.flow_id, key.seid, key.attempt, key.owner, now, AttemptOutcome.COMPLETED)
    end_call(tx, step, now)
    if effects.attributes:
        apply_writes(tx, key.flow_id, effects.attributes, now, key.seid)
    if effects.publishes:
        publish(tx, key.flow_id, effects.publishes, f"#{key.seid}", now)
    fresh = tx.get_step(key.flow_id, key.seid)
    assert fresh is not None
    woken = wake_step(tx, fresh, definitions, now, owner, started=started)
    if effects.publishes:
        wake_flow(tx, key.flow_id, definitions, now, None)
    return Waited(woken, kids)


# ------------------------------------------------------------------------------ wake --------
def wake_step(tx: Tx, step: StepRecord, definitions: Definitions, now: float, owner: str | None,
              counts: dict[str, int] | None = None, started: float | None = None) -> Woken | None:
    """Evaluate a waiting step's wait; when ready, consume what it selected, record
    StepWaitForCompleted and queue execute (leased to `owner` when given)."""
    if step.status is not StepState.WAITING or step.wait is None:
        return None
    wait = json.loads(step.wait)
    if counts is None:
        counts = tx.queue_counts(step.flow_id) if w.queues(wait) else {}
    selection = w.evaluate(wait, counts, now)
    if selection is None:
        tx.set_wait(step.flow_id, step.step_execution_id, step.wait, w.next_timer(wait, now))
        return None
    results = _consume(tx, step.flow_id, wait, selection, counts)
    tx.add_event(step.flow_id, now, "StepWaitForCompleted", {
        "stepExecutionId": step.step_execution_id, "fromStepExecutionId": step.from_step_execution_id,
        "stepType": step.step_type, "attempt": step.method_attempt,
        "startedTime": iso(started if started is not None else step.wait_started or now),
        "waitForCondition": wait, "conditionResults": results,
    })
    return _queue_execute(tx, step, results, definitions, now, owner)


def _consume(tx: Tx, flow_id: str, wait: dict[str, Any], sel: w.Selection, counts: dict[str, int]
             ) -> dict[str, Any]:
    """Take the selected channel conditions' messages; the condition results as persisted."""
    conditions = []
    for c in wait["conditions"]:
        entry: dict[str, Any] = {"index": c["index"], "kind": c["kind"], "conditionId": c["conditionId"],
                                 "selected": c["index"] in sel.selected}
        if c["kind"] == w.TIMER:
            entry["timerIndex"] = c["timerIndex"]
            entry["fired"] = sel.timers_fired[c["timerIndex"]]
            entry["skipped"] = c["skipped"]
        elif c["kind"] == w.SUBFLOW:  # the child's result, or (still running) none: a RUNNING snapshot
            entry.update(subFlowIndex=c["subFlowIndex"], flowType=c["flowType"], flowId=c["flowId"],
                         runId=c.get("runId"), result=c["result"])
        else:
            taken = tx.take_messages(flow_id, c["queue"], sel.takes.get(c["index"], 0))
            counts[c["queue"]] = counts.get(c["queue"], 0) - len(taken)
            entry.update(channel=c["channel"], instance=c["instance"], queue=c["queue"],
                         messageIds=[m for m, _ in taken], values=[json.loads(v) for _, v in taken])
        conditions.append(entry)
    return {"selected": list(sel.selected), "timersFired": list(sel.timers_fired), "conditions": conditions}


def _queue_execute(tx: Tx, step: StepRecord, results: dict[str, Any], definitions: Definitions, now: float,
                   owner: str | None, wait_for_failed: bool = False,
                   recovery_error: dict[str, str] | None = None) -> Woken | None:
    opts = ResolvedOptions.from_json(step.options)
    rec = json.dumps(recovery_error) if recovery_error is not None else None
    if not tx.ready_step(step, json.dumps(results), now, now + opts.total_duration, wait_for_failed, rec):
        return None
    leased = None
    if owner is not None:
        fresh = tx.get_step(step.flow_id, step.step_execution_id)
        flow = tx.get_flow(step.flow_id)
        assert fresh is not None and flow is not None
        found = definitions.step_for(flow.flow_id, flow.flow_type, flow.flow_ref, step.step_type)
        if found is not None:
            runnable = Runnable(fresh, flow.status, flow.run_id, flow.flow_type, flow.flow_ref,
                                flow_config=flow.flow_config)
            leased = lease(tx, runnable, found[0], found[1], owner, now)
    return Woken(step.step_execution_id, results, leased)


def wake_flow(tx: Tx, flow_id: str, definitions: Definitions, now: float, owner: str | None) -> list[Woken]:
    """Re-evaluate every waiting step of a running flow, oldest first (something it may wait
    for changed: a publish). Earlier steps consume first."""
    flow = tx.get_flow(flow_id)
    if flow is None or not flow.is_running:
        return []
    waiting = tx.waiting_steps(flow_id)
    if not waiting:
        return []
    counts = tx.queue_counts(flow_id)
    woken = [wake_step(tx, s, definitions, now, owner, counts) for s in waiting]
    return [x for x in woken if x is not None]


def proceed_after_wait_failure(tx: Tx, step: StepRecord, definitions: Definitions, now: float,
                               recovery_error: dict[str, str]) -> str:
    """wait_for failed for good under WaitForFailurePolicy.PROCEED: execute runs anyway, with
    `wait_for_method_failed()` true and the wait_for's error as `context.recovery_error` (as
    the server sets it). Returns the step execution id."""
    _queue_execute(tx, step, {"selected": [], "timersFired": [], "conditions": []}, definitions, now, None,
                   wait_for_failed=True, recovery_error=recovery_error)
    return step.step_execution_id


# ------------------------------------------------------------------------------ skip --------
def skip_timer(tx: Tx, flow_id: str, seid: str, condition_id: str | None, index: int | None,
               definitions: Definitions, now: float, owner: str | None) -> Woken | None:
    """Make a pending timer of a waiting step ready now; then evaluate the step."""
    flow = tx.get_flow(flow_id)
    if flow is None:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is not found")
    if not flow.is_running:
        raise FlowEndedError(f"flow {flow_id} is already {flow.status.value}")
    step = tx.get_step(flow_id, seid)
    if step is None:
        raise TimerNotFoundError(f"step execution {seid} of flow {flow_id} does not exist")
    if step.status is not StepState.WAITING or step.wait is None:
        raise TimerNotPendingError(f"step execution {seid} of flow {flow_id} is not waiting ({step.status.value})")
    wait = json.loads(step.wait)
    timer = w.find_timer(wait, condition_id, index)
    which = f"condition id {condition_id!r}" if condition_id is not None else f"index {index}"
    if timer is None:
        raise TimerNotFoundError(f"{seid} has no timer with {which}")
    if timer["skipped"] or w.timer_ready(timer, now):
        raise TimerNotPendingError(f"the timer with {which} of {seid} is not pending (it already fired)")
    timer["skipped"] = True
    text = json.dumps(wait)
    tx.set_wait(flow_id, seid, text, w.next_timer(wait, now))
    tx.add_event(flow_id, now, "TimerSkipped", {"stepExecutionId": seid, "conditionId": timer["conditionId"],
                                                "timerIndex": timer["timerIndex"]})
    fresh = tx.get_step(flow_id, seid)
    assert fresh is not None
    woken = wake_step(tx, fresh, definitions, now, owner)
    if flow.flow_config is not None:  # a skip counts toward its FlowConfig's continue-as-new threshold
        when_due(tx, flow_id, now)
    return woken


# ------------------------------------------------------------------------------ cancel ------
def cancel(tx: Tx, flow_id: str, step_types: set[str], siblings_of: StepRecord | None, sibling_types: set[str],
           exclude: set[str], now: float) -> list[str]:
    """Cancel the open executions of `step_types` flow-wide, and of `sibling_types` started by
    the same step execution as `siblings_of`; never those in `exclude`. Returns their ids."""
    chosen = []
    for s in tx.open_steps(flow_id):
        if s.step_execution_id in exclude:
            continue
        sibling = siblings_of is not None and s.from_step_execution_id == siblings_of.from_step_execution_id
        if s.step_type in step_types or (sibling and s.step_type in sibling_types):
            chosen.append(s.step_execution_id)
    for s in tx.cancel_steps(flow_id, chosen, now):
        tx.add_event(flow_id, now, "StepCanceled", {"stepExecutionId": s.step_execution_id, "stepType": s.step_type,
                                                    "phase": s.status.value})
    return chosen


def queues_empty(tx: Tx, flow_id: str, channels: tuple[str, ...]) -> bool:
    """Whether these channels (a ChannelMap's name: every instance) have no pending message."""
    counts = tx.queue_counts(flow_id)
    return not any(n and (q in channels or q.split("/", 1)[0] in channels) for q, n in counts.items())
