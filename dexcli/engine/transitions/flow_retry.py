"""Flow retry (StartFlowOptions.retry_policy, SubFlowOptions.retry_policy): a run that ends
FAILED starts again, as a new run of the same flow id, after the policy's backoff. As the
server's (the policy is the backend's workflow retry policy, service.go and flowRetryDefaults):

- **What is retried**: every FAILED end — a step that failed for good (WORKER_API_FAILED,
  INVALID_USER_FLOW_CODE), force_fail, a flow timeout under FAIL (or a HANDLER whose decision
  fails the flow), a client's stop with StopType.FAIL (the server fails the run with an error
  the backend retries). CANCELED, TERMINATED and COMPLETED runs are not retried.
- **The policy**: initial_interval (default 1 s), backoff_coefficient (2), maximum_interval
  (100 s), maximum_attempts (0: unlimited; it counts the first run). The delay after run n
  fails is initial * coefficient^(n-1), capped at maximum_interval. Dex's FlowRetryPolicy has
  no total_duration (the official SDK drops it without a word): dex refuses it.
- **The new run** takes the flow id with a new run id and the same input, start options
  (timeout with a fresh budget counted from when it begins, id reuse policy, FlowConfig,
  retry policy), initial attributes and SubFlow parent; its start step is queued for when the
  backoff ends (`next_attempt_at`: the scheduler starts it then, in virtual time too). Its
  FlowStarted names `retryOfRunId`, `attempt` and `backoffSeconds`.
- **The failed run** is closed FAILED (its FlowClosed says `retryState` IN_PROGRESS and the
  run it retried to) and archived under `<flow_id>$<run_id>` — in the transaction that failed
  it, so a crash never loses or doubles a retry. Its SubFlow parent hears nothing until a run
  ends for good; the last failure (MAXIMUM_ATTEMPTS_REACHED) is the flow's result.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.engine.deadlines import iso
from dexcli.engine.retry_policy import EXHAUSTED, IN_PROGRESS, attempt_of, delay_after, first_run_of
from dexcli.engine.transitions.steps import START_SOURCE
from dexcli.sdk.options import ResolvedOptions
from dexcli.store import ARCHIVE_SEPARATOR, FlowRecord, Method, StartSettings, StepRecord, StepState, Tx

__all__ = ["EXHAUSTED", "IN_PROGRESS", "Plan", "attempt_of", "plan", "retry"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a FAILED end of `flow` leads to: another run after `delay`, or the failure stands."""

    state: str  # IN_PROGRESS or MAXIMUM_ATTEMPTS_REACHED
    attempt: int  # the failed run's
    delay: float
    run_id: str  # the new run's (IN_PROGRESS)


def plan(flow: FlowRecord) -> Plan | None:
    """None: the flow has no retry policy."""
    if flow.retry_policy is None:
        return None
    policy, attempt = json.loads(flow.retry_policy), attempt_of(flow)
    limit = int(policy["maximumAttempts"])
    if limit and attempt >= limit:
        return Plan(EXHAUSTED, attempt, 0.0, "")
    return Plan(IN_PROGRESS, attempt, delay_after(policy, attempt), str(uuid.uuid4()))


def retry(tx: Tx, flow: FlowRecord, p: Plan, now: float) -> str:
    """The run `flow` has just closed FAILED (its FlowClosed written): archive it and make the
    new run (see the module's docstring), in the caller's transaction. Returns the archived id."""
    flow_id, due = flow.flow_id, now + p.delay
    origin = _origin(tx, flow)
    archived = tx.archive_run(flow_id, flow.run_id)
    if origin == flow_id:
        origin = archived
    tx.insert_flow_if_new(flow_id, p.run_id, flow.flow_type, flow.flow_ref, flow.input,
                          flow.request_id or str(uuid.uuid4()), now)
    tx.set_start_settings(flow_id, StartSettings(flow.timeout, flow.timeout_policy, flow.timeout_handler_options,
                                                 None, flow.id_reuse_policy, flow.flow_config, flow.retry_policy), due)
    if flow.parent_flow_id is not None and flow.parent_step_execution_id is not None:
        tx.set_parent(flow_id, flow.parent_flow_id, flow.parent_step_execution_id, flow.clock_offset)
    else:
        tx.carry_run(flow_id, flow.clock_offset, "[]", False)
    first = first_run_of(flow)
    tx.set_retry(flow_id, json.dumps({"attempt": p.attempt + 1, "firstRunId": first, "previousRunId": flow.run_id}))
    start = next((s for s in tx.run_steps(origin) if s.from_step_execution_id == START_SOURCE), None)
    if start is not None:
        _queue_start(tx, flow_id, start, due)
    started = _started_event(tx, origin)
    initial = started.get("initialAttributes") or {}
    if initial:
        apply_writes(tx, flow_id, _writes(initial), now)
    tx.add_event(flow_id, now, "FlowStarted", {
        "flowType": flow.flow_type, "runId": p.run_id,
        **({"startStepType": start.step_type, "startStepExecutionId": start.step_execution_id} if start else {}),
        "input": json.loads(flow.input or "null"), "retryOfRunId": flow.run_id, "firstRunId": first,
        "attempt": p.attempt + 1, "backoffSeconds": p.delay, "startStepEligibleTime": iso(due),
        **({"timeout": flow.timeout, "timeoutPolicy": flow.timeout_policy,
            "timeoutTime": iso(due + flow.timeout)} if flow.timeout else {}),
        **({"initialAttributes": initial} if initial else {}),
        **({"parentFlowId": flow.parent_flow_id, "parentStepExecutionId": flow.parent_step_execution_id}
           if flow.parent_flow_id else {})})
    return archived


def _origin(tx: Tx, flow: FlowRecord) -> str:
    """Where the flow's start is kept: this run, or (a run continued as new) its chain's first."""
    if flow.first_run_id is None:
        return flow.flow_id
    return f"{flow.flow_id}{ARCHIVE_SEPARATOR}{flow.first_run_id}"


def _started_event(tx: Tx, origin: str) -> dict[str, Any]:
    for e in tx.run_history(origin):
        if e.type == "FlowStarted":
            payload: dict[str, Any] = json.loads(e.payload)
            return payload
    return {}


def _writes(values: dict[str, Any]) -> dict[str, AttributeWrite]:
    """The start's initial attribute values again. A start with a retry policy was refused if
    one of them is indexed or synced (flow_timeout.start_settings): plain writes do."""
    out = {}
    for key, value in values.items():
        name, _, instance = key.partition("/")
        out[key] = AttributeWrite(key, name, instance or None, None if value is None else json.dumps(value), None)
    return out


def _queue_start(tx: Tx, flow_id: str, s: StepRecord, due: float) -> None:
    """The start step execution again, fresh, eligible at `due` (as a start delay queues it)."""
    first = ResolvedOptions.from_json(s.wait_options) if s.wait_options is not None else \
        ResolvedOptions.from_json(s.options)
    tx.insert_step(StepRecord(
        flow_id=flow_id, step_execution_id=s.step_execution_id, step_type=s.step_type, seq=1,
        from_step_execution_id=START_SOURCE, input=s.input, options=s.options, status=StepState.QUEUED, attempt=0,
        scheduled_at=due, first_attempt_at=None, next_attempt_at=due, lease_owner=None, attempt_started_at=None,
        last_heartbeat_time=None, heartbeat_deadline=None, attempt_deadline=None,
        total_deadline=due + first.total_duration, heartbeat_value=None, has_heartbeat_value=False,
        recovery_error=None, decision=None, end_time=None,
        method=Method.WAIT_FOR if s.wait_options is not None else Method.EXECUTE, wait_options=s.wait_options))
