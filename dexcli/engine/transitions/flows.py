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
from dexcli.engine.transitions.steps import START_SOURCE, Closed, Leased, NextStep, leased, new_step, queue_steps
from dexcli.engine.transitions.subflow_results import report_to_parent
from dexcli.sdk.errors import (
    DexServiceError,
    FlowAlreadyStartedError,
    FlowEndedError,
    FlowNotActiveOrNotFoundError,
    StatusCode,
)
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import FlowRecord, FlowState, StartSettings, StepRecord, Tx, json_object, timeout_time


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


@dataclass(frozen=True, slots=True)
class Starting:
    """One start of a batch (`start_all`): the request, the time on its flow's clock, and the
    owner its first attempt is leased to (None: queued for any worker)."""

    req: StartRequest
    now: float
    owner: str | None = None


def start(tx: Tx, req: StartRequest, now: float, owner: str | None = None) -> Started:
    """Create the flow and queue its start step (leased to `owner` when given, unless it has a
    start delay); a flow without one starts with no step, RUNNING until an RPC starts one. A
    taken flow id is refused before anything is written (or answered with the existing run for
    the same request id under ignore_already_started), unless the id reuse policy lets a new run
    replace the old one (`allows`, `make_room`)."""
    run_id, request_id = new_uuid(), req.request_id or new_uuid()
    args = _flow_row(req, run_id, request_id, now)
    previous = None
    if not tx.insert_flow_if_new(*args):
        existing = tx.get_flow(req.flow_id)
        assert existing is not None
        if answered(req, existing):
            return Started(existing.run_id, False)
        previous = make_room(tx, existing, req.settings.id_reuse_policy or "DEFAULT", run_id, now)
        tx.insert_flow_if_new(*args)
    return _created(tx, [(Starting(req, now, owner), run_id, previous)])[0]


def start_all(tx: Tx, starts: list[Starting]) -> list[Started | Exception]:
    """Many starts in one transaction, in their order, each with the outcome `start` gives it
    alone: its Started, or the exception it raised (a refused start's FlowAlreadyStartedError),
    that start undone alone (a savepoint) and the others written. The starts whose flow id is
    free (no flow has it, no earlier start of the batch takes it) are written together, one
    statement per table; a start of a taken id (id reuse, a second start of one id in the
    batch) is applied alone by `start`, in its place in the order. If writing such a group
    raises, its starts are applied again one by one, so that only the one at fault fails."""
    taken = tx.taken_flow_ids([s.req.flow_id for s in starts])
    out: list[Started | Exception] = []
    free: list[Starting] = []
    for s in starts:
        if s.req.flow_id in taken:
            _write_free(tx, free, out)
            out.append(_alone(tx, s))
        else:
            taken.add(s.req.flow_id)
            free.append(s)
    _write_free(tx, free, out)
    return out


def _write_free(tx: Tx, free: list[Starting], out: list[Started | Exception]) -> None:
    """Write the starts of free flow ids together (see start_all); `free` is emptied."""
    if not free:
        return
    got: list[Started | Exception]
    try:
        with tx.savepoint():
            ids = iter(new_uuids(2 * len(free)))
            made = [(s, next(ids), s.req.request_id or next(ids)) for s in free]
            tx.insert_flows([_flow_row(s.req, run_id, request_id, s.now) for s, run_id, request_id in made])
            got = list(_created(tx, [(s, run_id, None) for s, run_id, _ in made]))
    except Exception:  # one of them raised: which one, only applying them one by one tells
        got = [_alone(tx, s) for s in free]
    out.extend(got)
    free.clear()


def _alone(tx: Tx, s: Starting) -> Started | Exception:
    try:
        with tx.savepoint():
            return start(tx, s.req, s.now, s.owner)
    except Exception as exc:
        return exc


def _flow_row(req: StartRequest, run_id: str, request_id: str, now: float
              ) -> tuple[str, str, str, str | None, str, str, float]:
    input_json = req.start.input_json if req.start is not None else "null"
    return req.flow_id, run_id, req.definition.flow_type, req.flow_ref, input_json, request_id, now


def _created(tx: Tx, made: list[tuple[Starting, str, Reused | None]]) -> list[Started]:
    """What a start writes once its flow's row is in (each with its new run id and the
    previous run it replaced, if any): its start options, initial attributes, start step and
    FlowStarted; the start steps, and the events, of all of them in one statement each."""
    news: list[tuple[StepRecord, tuple[str, str] | None]] = []
    parts: list[tuple[StepRecord | None, dict[str, Any] | None]] = []
    for s, _, previous in made:
        req, now, settings = s.req, s.now, s.req.settings
        if not settings.is_default:
            tx.set_start_settings(req.flow_id, settings, now)
        delay = settings.start_delay or 0.0
        # never lease at once after id reuse: an outcome of the old run's same-named step is still fenced
        owner = None if previous is not None or delay else s.owner
        initial = apply_writes(tx, req.flow_id, req.attributes, now) if req.attributes else None
        step = None
        if req.start is not None:
            news.append(new_step(tx, req.flow_id, req.start, START_SOURCE, now + delay, (1, 1), owner))
            step = news[-1][0]
        parts.append((step, initial))
    if news:
        queue_steps(tx, news)
    events: list[tuple[str, float, str, str]] = []
    for (s, run_id, previous), (step, initial) in zip(made, parts, strict=True):
        req, settings = s.req, s.req.settings
        head = {"flowType": req.definition.flow_type, "runId": run_id}
        if step is not None:
            head["startStepType"], head["startStepExecutionId"] = step.step_type, step.step_execution_id
        rest = {} if settings.is_default else _start_options(settings, s.now)  # each key only when given
        if previous:
            rest["previousRunId"] = previous.previous_run_id
        if initial:
            rest["initialAttributes"] = initial
        if req.parent:
            rest["parentFlowId"], rest["parentStepExecutionId"] = req.parent
        input_json = req.start.input_json if req.start is not None else "null"
        events.append((req.flow_id, s.now, "FlowStarted", json_object(head, ("input", input_json), rest)))
    tx.add_events(events)
    out = []
    for (s, run_id, previous), (step, _) in zip(made, parts, strict=True):
        req = s.req
        got = None if req.start is None or step is None or step.lease_owner is None or req.settings.start_delay \
            else leased(tx, step, run_id, req.start.spec, req.definition, req.settings.flow_config)
        out.append(Started(run_id, True, got, previous.terminated if previous else None))
    return out


def new_uuid(h: str | None = None) -> str:
    """A random (version 4) UUID's text, as `str(uuid.uuid4())` gives it, without building the
    UUID object (a sixth of the cost; each start makes two): 16 random bytes in hex (`h`, or
    new ones), the version digit set to 4 and the variant digit's top bits to 10 (RFC 4122)."""
    if h is None:
        h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def new_uuids(n: int) -> list[str]:
    """`n` new_uuid()s from one read of random bytes (a read costs half a new_uuid)."""
    h = os.urandom(16 * n).hex()
    return [new_uuid(h[i:i + 32]) for i in range(0, 32 * n, 32)]


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


class RunNotCurrentError(DexServiceError):
    """An operator's change named a run (the Dex CLI's `--run-id`) that is not the flow's current
    one: refused in the change's own transaction, so nothing changed."""

    exit_code = 4
    grpc_code = StatusCode.FAILED_PRECONDITION


def check_current_run(flow: FlowRecord, run_id: str | None, why: str) -> None:
    """RunNotCurrentError unless `run_id` is None or the flow's current run (`why`: what only
    the current run can do)."""
    if run_id is not None and run_id != flow.run_id:
        raise RunNotCurrentError(f"run {run_id} is not the current run of flow {flow.flow_id} ({flow.run_id}): {why}")


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
