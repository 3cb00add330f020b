"""A flow's start (with its start options and id reuse), its close, and a client's stop.

Whether a start may take a flow id that already has a run (IdReusePolicy, as Dex):

    policy                       existing run RUNNING          existing run closed
    DEFAULT, DISALLOW            refuse                        refuse
    ALLOW_IF_PREVIOUS_FAILED     refuse                        new run if it ended FAILED, CANCELED or TERMINATED
    ALLOW_IF_NOT_RUNNING         refuse                        new run
    ALLOW_TERMINATE_IF_RUNNING   TERMINATED, then a new run    new run

A refused start raises FlowAlreadyStartedError, unless ignore_already_started is set and its
request id is the existing run's: then it answers with that run. A new run takes the flow id;
the previous run is kept under `<flow_id>$<run_id>` (dexcli.store.tx_runs).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.engine.deadlines import iso
from dexcli.engine.transitions import flow_retry
from dexcli.engine.transitions.steps import START_SOURCE, Closed, Leased, NextStep, leased, queue_step
from dexcli.engine.transitions.subflow_results import report_to_parent
from dexcli.sdk.errors import FlowAlreadyStartedError, FlowEndedError, FlowNotActiveOrNotFoundError
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import FlowRecord, FlowState, StartSettings, Tx, json_object, timeout_time


@dataclass(frozen=True, slots=True)
class StartRequest:
    definition: FlowDefinition
    start: NextStep | None  # None: a flow with no start step (its steps are started by RPCs)
    flow_id: str
    flow_ref: str | None
    request_id: str | None
    ignore_already_started: bool
    settings: StartSettings = StartSettings()  # timeout, start delay, id reuse policy
    attributes: dict[str, AttributeWrite] = field(default_factory=dict)  # initial values (with_attribute)
    parent: tuple[str, str] | None = None  # a SubFlow's (parent flow id, step execution id)


@dataclass(frozen=True, slots=True)
class Started:
    run_id: str
    created: bool  # False: the same request had already started it
    leased: Leased | None = None
    terminated: Closed | None = None  # the previous run, terminated by ALLOW_TERMINATE_IF_RUNNING


def answered(req: StartRequest, existing: FlowRecord) -> bool:
    """A start whose flow id `existing` has: refused (FlowAlreadyStartedError) unless its id
    reuse policy lets a new run take the id (False) or, under ignore_already_started, the same
    request id started `existing` (True: that run answers it)."""
    if allows(req.settings.id_reuse_policy or "DEFAULT", existing):
        return False
    if req.ignore_already_started and req.request_id and existing.request_id == req.request_id:
        return True
    raise FlowAlreadyStartedError(f"flow {req.flow_id} already exists ({existing.status.value}, {existing.flow_type})")


def start(tx: Tx, req: StartRequest, now: float, owner: str | None = None) -> Started:
    """Create the flow and queue its start step (leased to `owner` when given, unless it has a
    start delay); a flow without one starts with no step, RUNNING until an RPC starts one. A
    taken flow id is refused before anything is written (or answered with the existing run for
    the same request id under ignore_already_started), unless the id reuse policy lets a new run
    replace the old one (`allows`, `make_room`)."""
    run_id, request_id, s = new_uuid(), req.request_id or new_uuid(), req.settings
    input_json = req.start.input_json if req.start is not None else "null"
    args = (req.flow_id, run_id, req.definition.flow_type, req.flow_ref, input_json, request_id, now)
    previous = None
    if not tx.insert_flow_if_new(*args):
        existing = tx.get_flow(req.flow_id)
        assert existing is not None
        if answered(req, existing):
            return Started(existing.run_id, False)
        previous = make_room(tx, existing, s.id_reuse_policy or "DEFAULT", run_id, now)
        tx.insert_flow_if_new(*args)
    plain = s.is_default
    if not plain:
        tx.set_start_settings(req.flow_id, s, now)
    delay = s.start_delay or 0.0
    if previous is not None:  # never lease at once: an outcome of the old run's same-named step is still fenced
        owner = None
    initial = apply_writes(tx, req.flow_id, req.attributes, now) if req.attributes else None
    step = None if req.start is None else queue_step(tx, req.flow_id, req.start, START_SOURCE, now + delay, (1, 1),
                                                      None if delay else owner)
    head = {"flowType": req.definition.flow_type, "runId": run_id}
    if step is not None:
        head["startStepType"], head["startStepExecutionId"] = step.step_type, step.step_execution_id
    rest = {} if plain else _start_options(s, now)  # each key only when given
    if previous:
        rest["previousRunId"] = previous.previous_run_id
    if initial:
        rest["initialAttributes"] = initial
    if req.parent:
        rest["parentFlowId"], rest["parentStepExecutionId"] = req.parent
    tx.add_event(req.flow_id, now, "FlowStarted", json_object(head, ("input", input_json), rest))
    got = None if req.start is None or step is None or step.lease_owner is None or delay else leased(
        tx, step, run_id, req.start.spec, req.definition, s.flow_config)
    return Started(run_id, True, got, previous.terminated if previous else None)


def new_uuid() -> str:
    """A random (version 4) UUID's text, as `str(uuid.uuid4())` gives it, without building the
    UUID object (a sixth of the cost; each start makes two): 16 random bytes in hex, the
    version digit set to 4 and the variant digit's top bits to 10 (RFC 4122)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}  # a hex digit with its top two bits 10


def _start_options(s: StartSettings, now: float) -> dict[str, Any]:
    """The start options FlowStarted records (only those given)."""
    out: dict[str, Any] = {}
    if s.timeout:
        out.update(timeout=s.timeout, timeoutPolicy=s.timeout_policy,
                   timeoutTime=iso(timeout_time(now, s.timeout, s.start_delay)))
    if s.start_delay:
        out.update(startDelay=s.start_delay, startStepEligibleTime=iso(now + s.start_delay))
    if s.id_reuse_policy not in (None, "DEFAULT"):
        out["idReusePolicy"] = s.id_reuse_policy
    if s.retry_policy:
        out.update(retryPolicy=json.loads(s.retry_policy), attempt=1)
    return out


def close(tx: Tx, flow_id: str, now: float, closed: Closed, completions: str | None = None,
          if_idle: bool = False) -> bool:
    """End the flow: its open steps cancelled, FlowClosed with the collected results
    (`if_idle`: only if it has no open step). A flow that has already ended is left as it is.
    Only a completed run keeps its results, as a Dex server returns results only for a run
    that succeeded. Returns whether it closed now."""
    if closed.status is not FlowState.COMPLETED:
        completions = "[]"
    row = tx.close_flow(flow_id, closed.status, now, closed.error_type, closed.message, completions, if_idle)
    if row is None:
        return False
    if not if_idle:
        tx.cancel_open_steps(flow_id, now)
    if row.has_snapshots:  # no method call outlives its flow (the close's statement saw whether any is kept)
        tx.forget_call_snapshot(flow_id)
    ended = tx.get_flow(flow_id) if closed.status is FlowState.FAILED else None
    completions = row.completions
    again = flow_retry.plan(ended) if ended is not None and closed.status is FlowState.FAILED else None
    retried = {"retryState": again.state, **({"retriedToRunId": again.run_id} if again.run_id else {})} \
        if again is not None else {}
    tx.add_event(flow_id, now, "FlowClosed", json_object(
        {"flowStatus": closed.status.value, "errorType": closed.error_type, "errorMessage": closed.message},
        ("results", completions), retried))  # the stored JSON list as it is (checked as its row was read)
    if ended is not None and again is not None and again.state == flow_retry.IN_PROGRESS:
        flow_retry.retry(tx, ended, again, now)  # a new run of the flow id: nothing ended for good yet
        return True
    if row.has_parent:  # a SubFlow's end: its parent's wait re-evaluates
        report_to_parent(tx, flow_id, now)
    return True


_STOPS = {"CANCEL": Closed(FlowState.CANCELED), "TERMINATE": Closed(FlowState.TERMINATED),
          "FAIL": Closed(FlowState.FAILED, "CLIENT_API_FAILED")}


def stop(tx: Tx, flow_id: str, stop_type: str, reason: str | None, now: float) -> Closed:
    """A client stops a running flow: CANCEL, TERMINATE or FAIL."""
    flow = tx.get_flow(flow_id)
    if flow is None:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is not found")
    if not flow.is_running:
        raise FlowEndedError(f"flow {flow_id} is already {flow.status.value}")
    kind = _STOPS[stop_type]
    # FAIL's default is the server's, what client code reads; CANCEL and TERMINATE give client
    # code no message, so dex's note is only for inspect and the live view
    default = "fail by client" if stop_type == "FAIL" else f"stopped ({stop_type.lower()})"
    close(tx, flow_id, now, Closed(kind.status, kind.error_type, reason or default))
    return Closed(kind.status, kind.error_type, reason)


# --------------------------------------------------------------------------- id reuse -----
_UNSUCCESSFUL = frozenset({FlowState.FAILED, FlowState.CANCELED, FlowState.TERMINATED})


def allows(policy: str, existing: FlowRecord) -> bool:
    """Whether `policy` (an IdReusePolicy name) lets a new run replace `existing`."""
    if policy == "ALLOW_TERMINATE_IF_RUNNING":
        return True
    if existing.is_running:
        return False
    if policy == "ALLOW_IF_NOT_RUNNING":
        return True
    return policy == "ALLOW_IF_PREVIOUS_FAILED" and existing.status in _UNSUCCESSFUL


@dataclass(frozen=True, slots=True)
class Reused:
    """The flow id is free for a new run: the previous run (archived under `archived_as`),
    and how it closed when this start terminated it."""

    previous_run_id: str
    archived_as: str
    terminated: Closed | None


def make_room(tx: Tx, existing: FlowRecord, policy: str, new_run_id: str, now: float) -> Reused:
    """Terminate the existing run if the policy says so, and archive it. Raises
    FlowAlreadyStartedError when the policy refuses (nothing is written then)."""
    if not allows(policy, existing):
        raise FlowAlreadyStartedError(
            f"flow {existing.flow_id} already exists ({existing.status.value}, {existing.flow_type}); "
            f"id reuse policy {policy} refuses a new run")
    return retire_run(tx, existing, now, Closed(
        FlowState.TERMINATED, None, f"terminated: run {new_run_id} took the flow id (ALLOW_TERMINATE_IF_RUNNING)"))


def retire_run(tx: Tx, existing: FlowRecord, now: float, ending: Closed) -> Reused:
    """A run leaves its flow id to a new run (id reuse, time travel; any way a flow id gets a
    new run): closed as `ending` if it still runs, then archived under `<flow_id>$<run_id>`
    with its steps and history. The returned record's `terminated` is `ending` if it closed it."""
    ended = None
    if existing.is_running:
        close(tx, existing.flow_id, now, ending)
        ended = ending
    archived = tx.archive_run(existing.flow_id, existing.run_id)
    return Reused(existing.run_id, archived, ended)
