"""Time travel (Client.time_travel, `dex time-travel`): a new run of a flow made from a point of
its current run's history, in one transaction.

The point is an event of the run's history, chosen by the request's type:

    BEGINNING            the run's FlowStarted
    HISTORY_EVENT_TIME   the event just before the first one at or after that time
    STEP_TYPE            where the latest execution of that step type was created (its wait_for, or
                         its execute for a step without one, runs again)
    STEP_EXECUTION_ID    WAIT_FOR: where that execution was created; EXECUTE: where its wait_for
                         completed (the wait's result is kept and its execute runs again)

The old run is closed TERMINATED if it still runs and archived under `<flow_id>$<run_id>`
(`flows.retire_run`, as id reuse does). The new run takes the flow id with a new run id, and is
what the old run was at the point:
- its history is the old run's events up to the point (ids and times as they were), then a
  TimeTravelFork event (`previousRunId`, `targetEventId`, the request);
- the step executions that had ended by then are copied as they ended; those still open then
  (the chosen one among them) are queued again, from the start of the method they were in;
- its attributes, pending channel messages and collected outputs are those the kept events
  wrote: initial attributes, steps' and RPCs' attribute writes and publishes, the messages waits
  consumed (FIFO per queue);
- then, unless `skip_writes_reapply`, every RPC that committed after the point is re-applied
  (its attribute writes, publishes, deletes and the steps it started; not re-run), each recorded
  again as RpcExecutionCompleted with `reappliedFromEventId`.
What a wait_for wrote (attributes, publishes) is not in the history, so a new run does not have
it. A point the history lacks, or one whose open steps the flow's code no longer has, is
refused (TimeTravelPointError) before anything is written.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.engine.deadlines import iso
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions.flows import check_current_run, retire_run
from dexcli.engine.transitions.steps import START_SOURCE, Closed, NextStep, queue_step
from dexcli.engine.transitions.waiting import publish
from dexcli.sdk.errors import FlowNotFoundError, TimeTravelPointError
from dexcli.sdk.options import ResolvedOptions
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import FlowState, HistoryRecord, Method, StartSettings, StepRecord, StepState, Tx, json_object

TYPES = ("BEGINNING", "HISTORY_EVENT_TIME", "STEP_TYPE", "STEP_EXECUTION_ID")
METHODS = ("WAIT_FOR", "EXECUTE")
_ENDS = ("StepExecuteCompleted", "StepExecuteFailed", "StepCanceled")
_COMPLETING = frozenset({"GRACEFUL_COMPLETE", "FORCE_COMPLETE"})


@dataclass(frozen=True, slots=True)
class TimeTravelRequest:
    flow_id: str
    type: str  # one of TYPES
    history_event_time: float | None = None  # epoch seconds on the flow's clock
    step_type: str | None = None
    step_execution_id: str | None = None
    step_method: str | None = None  # one of METHODS (STEP_EXECUTION_ID only)
    reason: str | None = None
    skip_writes_reapply: bool = False
    run_id: str | None = None  # the Dex CLI's --run-id: refused unless it is the current run


def check_request(req: TimeTravelRequest) -> None:
    """The selector rules a Dex server checks first (ValueError, as the official Client raises)."""
    if not req.flow_id:
        raise ValueError("flow ID is required")
    if req.type not in TYPES:
        raise ValueError("time travel type is required")
    if req.type == "STEP_EXECUTION_ID":
        if not req.step_execution_id:
            raise ValueError("step execution ID is required")
        if req.step_method not in METHODS:
            raise ValueError("step method must be WaitFor or Execute")
    elif req.step_method is not None:
        raise ValueError("step method is only valid for a Step execution ID")
    if req.type == "HISTORY_EVENT_TIME" and req.history_event_time is None:
        raise ValueError("history event time is required")
    if req.type == "STEP_TYPE" and not req.step_type:
        raise ValueError("step type is required")


@dataclass(frozen=True, slots=True)
class Travelled:
    """The new run, and what became of the old one."""

    run_id: str
    previous_run_id: str
    archived_as: str  # the old run's rows: `<flow_id>$<run_id>`
    target_event_id: int  # the last event of the old run the new one keeps
    requeued: tuple[str, ...]  # the step executions queued again
    reapplied: int  # RPCs re-applied
    terminated: Closed | None  # how the old run closed, when it was still running


@dataclass
class _Marks:
    """Where each step execution of the run was created, had its wait completed and ended."""

    created: dict[str, int]
    waited: dict[str, tuple[int, dict[str, Any]]]  # event id, its condition results
    ended: dict[str, int]


def _marks(events: list[HistoryRecord], steps: list[StepRecord]) -> _Marks:
    m = _Marks({}, {}, {})
    for e in events:
        p = json.loads(e.payload)
        seid = p.get("stepExecutionId")
        made: list[str] = []
        if e.type == "FlowStarted" and p.get("startStepExecutionId"):
            made.append(p["startStepExecutionId"])
        elif e.type == "StepExecuteCompleted":
            made += [n["stepExecutionId"] for n in (p.get("decision") or {}).get("next", [])]
        elif e.type == "StepExecuteFailed" and p.get("recoveryStepExecutionId"):
            made.append(p["recoveryStepExecutionId"])
        elif e.type == "RpcExecutionCompleted":
            made += list(p.get("nextSteps") or [])
        for made_id in made:
            m.created.setdefault(made_id, e.event_id)
        if e.type == "StepWaitForCompleted" and seid:
            m.waited[seid] = (e.event_id, p.get("conditionResults") or {})
        elif e.type == "StepWaitForFailed" and seid:
            m.waited.setdefault(seid, (e.event_id, {"selected": [], "timersFired": [], "conditions": []}))
        if e.type in _ENDS and seid:
            m.ended.setdefault(seid, e.event_id)
    for s in steps:  # made where no event names it (a timeout handler): the first event from then on
        if s.step_execution_id not in m.created:
            later = [e.event_id for e in events if e.event_time >= s.scheduled_at]
            m.created[s.step_execution_id] = later[0] if later else events[-1].event_id
    return m


def _point(req: TimeTravelRequest, run_id: str, events: list[HistoryRecord], steps: list[StepRecord],
           m: _Marks) -> tuple[int, str | None]:
    """The last event the new run keeps, and the step execution the request chose (if any)."""
    where = f"run {run_id} of flow {req.flow_id}"
    if req.type == "BEGINNING":
        return 1, None
    if req.type == "HISTORY_EVENT_TIME":
        assert req.history_event_time is not None
        at = req.history_event_time
        later = [e.event_id for e in events if e.event_time >= at]
        if not later:
            raise TimeTravelPointError(f"{where} has no history event at or after {iso(at)} "
                                       f"(its last is at {iso(events[-1].event_time)})")
        return max(1, later[0] - 1), None
    if req.type == "STEP_TYPE":
        of_type = [s for s in steps if s.step_type == req.step_type]
        if not of_type:
            ran = sorted({s.step_type for s in steps})
            raise TimeTravelPointError(f"step type {req.step_type} never ran in {where} "
                                       f"(its step types: {', '.join(ran) or 'none'})")
        return m.created[of_type[-1].step_execution_id], of_type[-1].step_execution_id
    seid = req.step_execution_id or ""
    step = next((s for s in steps if s.step_execution_id == seid), None)
    if step is None:
        known = ", ".join(s.step_execution_id for s in steps) or "none"
        raise TimeTravelPointError(f"no step execution {seid} in {where} (its step executions: {known})")
    if req.step_method == "EXECUTE" and step.wait_options is not None:
        if seid not in m.waited:
            raise TimeTravelPointError(f"the wait_for of {seid} never completed in {where}, so its execute "
                                       "never ran: choose the WAIT_FOR method")
        return m.waited[seid][0], seid
    return m.created[seid], seid


@dataclass
class _State:
    """What the kept events wrote: attributes by key, pending messages per queue, outputs."""

    attributes: dict[str, Any]
    queues: dict[str, deque[tuple[str | None, str, str]]]  # queue -> (old message id, value JSON, source)
    completions: list[dict[str, Any]]
    graceful: bool


def _replay(events: list[HistoryRecord]) -> _State:
    st = _State({}, {}, [], False)
    for e in events:
        p = json.loads(e.payload)
        if e.type == "FlowStarted":
            st.attributes.update(p.get("initialAttributes") or {})
        elif e.type == "StepExecuteCompleted":
            st.attributes.update(p.get("upsertAttributes") or {})
            for msg in p.get("publishes") or []:
                st.queues.setdefault(msg["queue"], deque()).append(
                    (None, json.dumps(msg["value"]), f"#{p['stepExecutionId']}"))
            decision = p.get("decision") or {}
            if decision.get("kind") == "GRACEFUL_COMPLETE":
                st.graceful = True
            if decision.get("kind") in _COMPLETING and decision.get("output") is not None:
                st.completions.append({"stepType": p["stepType"], "stepExecutionId": p["stepExecutionId"],
                                       "output": decision["output"]})
        elif e.type == "RpcExecutionCompleted":
            _rpc_writes(st, p)
        elif e.type == "StepWaitForCompleted":
            for c in (p.get("conditionResults") or {}).get("conditions", []):
                queue = st.queues.get(c.get("queue") or "")
                for _ in c.get("messageIds") or []:
                    if queue:
                        queue.popleft()
    return st


def _rpc_writes(st: _State, p: dict[str, Any]) -> None:
    st.attributes.update(p.get("upsertAttributes") or {})
    for msg in p.get("publishes") or []:
        st.queues.setdefault(msg["queue"], deque()).append(
            (msg.get("messageId"), json.dumps(msg["value"]), f"rpc:{p['rpcName']}"))
    gone = set(p.get("deletes") or [])
    if gone:
        for q, msgs in st.queues.items():
            st.queues[q] = deque(x for x in msgs if x[0] not in gone)


def time_travel(tx: Tx, req: TimeTravelRequest, now: float, definitions: Definitions) -> Travelled:
    """Make the new run (see the module's docstring). When the flow's code loads here, the
    steps to queue again are checked against it, BEGINNING queues its start step as the code
    has it now, and attribute writes get their search index; else the old run's rows are all
    there is to go by."""
    check_request(req)
    flow = tx.get_flow(req.flow_id)
    if flow is None:
        raise FlowNotFoundError(f"flow {req.flow_id} is not found")
    check_current_run(flow, req.run_id, "time travel starts from the current run")
    events, steps = tx.run_history(req.flow_id), tx.run_steps(req.flow_id)
    if not events:
        raise TimeTravelPointError(f"flow {req.flow_id} has no history to time travel in")
    m = _marks(events, steps)
    last, chosen = _point(req, flow.run_id, events, steps, m)
    kept = [s for s in steps if m.ended.get(s.step_execution_id, last + 1) <= last]
    ended = {s.step_execution_id for s in kept}
    open_ = [s for s in steps if m.created.get(s.step_execution_id, last + 1) <= last
             and s.step_execution_id not in ended]
    definition = definitions.loadable(flow.flow_type, flow.flow_ref)
    start = None
    if req.type == "BEGINNING" and definition is not None:  # the flow's start as its code has it now
        open_, start = [], _start_step(definitions, definition, flow.input or "null")
    if definition is not None:
        gone = [s for s in open_ if s.step_type not in definition.steps and not s.step_type.startswith("sys:")]
        if gone:
            s = gone[0]
            raise TimeTravelPointError(
                f"step {s.step_type} ({s.step_execution_id}, open at that point) is no longer in the flow "
                f"{flow.flow_type}: time travel to an earlier step, or to the beginning")
    state = _replay([e for e in events if e.event_id <= last])

    run_id = str(uuid.uuid4())
    retired = retire_run(tx, flow, now, Closed(
        FlowState.TERMINATED, None, f"time travel: run {run_id} replaces it" + (f" ({req.reason})" if req.reason
                                                                                 else "")))
    old = retired.archived_as
    tx.insert_flow_if_new(req.flow_id, run_id, flow.flow_type, flow.flow_ref, flow.input, str(uuid.uuid4()), now)
    tx.carry_run(req.flow_id, flow.clock_offset, json.dumps(state.completions), state.graceful)
    settings = StartSettings(flow.timeout, flow.timeout_policy, flow.timeout_handler_options, None,
                             flow.id_reuse_policy, retry_policy=flow.retry_policy)  # its retries count anew
    if not settings.is_default:
        tx.set_start_settings(req.flow_id, settings, now)
    first_seid = f"{start.spec.step_type}-1" if start is not None else None
    # the attempts the old run's rows had of the step executions queued again: theirs number after
    again = {s.step_execution_id for s in open_} | ({first_seid} if first_seid else set())
    before = {s.step_execution_id: s.attempt for s in steps if s.attempt and s.step_execution_id in again}
    tx.copy_history(old, req.flow_id, last)
    tx.add_event(req.flow_id, now, "TimeTravelFork", {
        "previousRunId": flow.run_id, "runId": run_id, "targetEventId": last, "timeTravelType": req.type,
        **({"targetStepExecutionId": chosen} if chosen else {}),
        **({"targetStepType": req.step_type} if req.step_type else {}),
        **({"historyEventTime": iso(req.history_event_time)} if req.history_event_time is not None else {}),
        **({"stepMethod": req.step_method} if req.step_method else {}),
        "reason": req.reason, "skipWritesReapply": req.skip_writes_reapply,
        "requeued": [s.step_execution_id for s in open_] or ([first_seid] if first_seid else []),
        **({"attemptsBefore": before} if before else {})})
    tx.copy_steps(old, req.flow_id, [s.step_execution_id for s in kept])
    requeued = [s.step_execution_id for s in open_]
    if start is not None:
        first = queue_step(tx, req.flow_id, start, START_SOURCE, now, (1, 1))
        if first.step_execution_id in before:  # numbered after the old run's, as _requeue does
            tx.number_attempts_after(req.flow_id, first.step_execution_id, before[first.step_execution_id])
        requeued.append(first.step_execution_id)
    for s in open_:
        execute = s.step_execution_id in m.waited and m.waited[s.step_execution_id][0] <= last
        _requeue(tx, req.flow_id, s, s.step_execution_id, s.seq, s.from_step_execution_id, now,
                 m.waited[s.step_execution_id][1] if execute else None, before.get(s.step_execution_id, 0))
    ids = _restore(tx, req.flow_id, state, definition, now)
    reapplied = 0
    if not req.skip_writes_reapply:
        by_id = {s.step_execution_id: s for s in steps}
        for e in events:
            if e.event_id > last and e.type == "RpcExecutionCompleted":
                _reapply(tx, req.flow_id, e, json.loads(e.payload), ids, by_id, definition, now)
                reapplied += 1
    return Travelled(run_id, flow.run_id, old, last, tuple(requeued), reapplied, retired.terminated)


def _start_step(definitions: Definitions, definition: FlowDefinition, input_json: str) -> NextStep | None:
    spec = definition.start_step
    return None if spec is None else NextStep(spec, input_json, definitions.options(definition, spec))


def _requeue(tx: Tx, flow_id: str, s: StepRecord, seid: str, seq: int, from_seid: str, now: float,
             condition_results: dict[str, Any] | None, attempts_before: int) -> None:
    """Queue step execution `s` of the old run again in the new one (as `seid`): from the start
    of its first method, or (`condition_results`: its wait had completed) at its execute; its
    attempts numbered after `attempts_before`."""
    opts = ResolvedOptions.from_json(s.options)
    first = ResolvedOptions.from_json(s.wait_options) if s.wait_options is not None else opts
    fresh = StepRecord(
        flow_id=flow_id, step_execution_id=seid, step_type=s.step_type, seq=seq,
        from_step_execution_id=from_seid, input=s.input, options=s.options, status=StepState.QUEUED, attempt=0,
        scheduled_at=now, first_attempt_at=None, next_attempt_at=now, lease_owner=None, attempt_started_at=None,
        last_heartbeat_time=None, heartbeat_deadline=None, attempt_deadline=None,
        total_deadline=now + first.total_duration, heartbeat_value=None, has_heartbeat_value=False,
        recovery_error=s.recovery_error, decision=None, end_time=None,
        method=Method.WAIT_FOR if s.wait_options is not None else Method.EXECUTE, wait_options=s.wait_options)
    tx.insert_step(fresh)
    if condition_results is not None and s.wait_options is not None:
        tx.ready_step(fresh, json.dumps(condition_results), now, now + opts.total_duration, s.wait_for_failed)
        if s.locals is not None:  # what its wait_for left for its execute
            tx.set_locals(flow_id, seid, s.locals)
    if attempts_before:
        tx.number_attempts_after(flow_id, seid, attempts_before)


def _writes(values: dict[str, Any], definition: FlowDefinition | None) -> dict[str, AttributeWrite]:
    out = {}
    for key, value in values.items():
        name, _, instance = key.partition("/")
        attr = definition.attributes.get(name) if definition is not None else None
        out[key] = AttributeWrite(key, name, unquote(instance) if instance else None,
                                  None if value is None else json.dumps(value), getattr(attr, "index", None),
                                  getattr(attr, "sync_to_attribute_store", False))  # the new run's projection
    return out


def _restore(tx: Tx, flow_id: str, st: _State, definition: FlowDefinition | None, now: float) -> dict[str, str]:
    """The new run's attributes and pending messages as the kept events left them; returns the
    old message ids of those messages -> their new ids."""
    present = {k: v for k, v in st.attributes.items() if v is not None}
    if present:
        apply_writes(tx, flow_id, _writes(present, definition), now)
    ids: dict[str, str] = {}
    for queue, msgs in st.queues.items():
        for old_id, value, source in msgs:
            (new,) = publish(tx, flow_id, [(queue, value)], source, now)
            if old_id is not None:
                ids[old_id] = new
    return ids


def _reapply(tx: Tx, flow_id: str, e: HistoryRecord, p: dict[str, Any], ids: dict[str, str],
             steps: dict[str, StepRecord], definition: FlowDefinition | None, now: float) -> None:
    """One RPC that committed after the point, re-applied to the new run: its writes, publishes,
    deletes and started steps (its handler is not run again)."""
    if p.get("upsertAttributes"):
        apply_writes(tx, flow_id, _writes(p["upsertAttributes"], definition), now)
    published = []
    for msg in p.get("publishes") or []:
        (new,) = publish(tx, flow_id, [(msg["queue"], json.dumps(msg["value"]))], f"rpc:{p['rpcName']}", now)
        ids[msg.get("messageId", "")] = new
        published.append({**msg, "messageId": new})
    deleted = [ids[d] for d in p.get("deletes") or [] if d in ids and tx.delete_message(flow_id, ids[d])]
    started = []
    for seid in p.get("nextSteps") or []:
        old = steps.get(seid)
        if old is None:
            continue
        n, seq = tx.next_step_number(flow_id, old.step_type)
        new_seid = f"{old.step_type}-{n}"
        _requeue(tx, flow_id, old, new_seid, seq, f"__rpc/{p['rpcName']}", now, None, 0)  # a new execution
        started.append(new_seid)
    tx.add_event(flow_id, now, "RpcExecutionCompleted", json_object(
        {"rpcName": p["rpcName"], "input": p.get("input"), "output": p.get("output"), "publishes": published,
         "deletes": deleted, "nextSteps": started, "canceled": [], "reappliedFromEventId": e.event_id},
        {"upsertAttributes": p["upsertAttributes"]} if p.get("upsertAttributes") else {}))
