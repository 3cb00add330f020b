"""Every state change of a flow, as one function over one transaction.

Each function takes the transaction, the facts it needs and `now`, writes rows and history,
and returns what happened as a record; the engine commits it (often with others: see
dexcli.engine.batch) and acts on the result after COMMIT. None of them keeps state, starts
tasks or reports events. A write for an attempt this process no longer owns raises `Fenced`
and the caller's transaction is rolled back.

    start      a flow row, its start step queued (or leased), FlowStarted
    lease      a queued or backing-off step's next attempt, to one owner
    heartbeat  an attempt's heartbeat, checkpoint and Stream messages
    complete   an attempt's decision: next steps, collected output, StepExecuteCompleted, maybe close
    fail       a failed attempt: retry after backoff, or recovery step / close once exhausted
    reap       another process's attempt whose deadline passed: declared lost, then `fail`
    stop       a client's cancel / terminate / fail
    close      the flow's end: open steps cancelled, FlowClosed
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from dexcli.engine.deadlines import earliest_deadline, iso, timeout_detail
from dexcli.engine.definitions import Definitions
from dexcli.sdk.decisions import DecisionKind
from dexcli.sdk.errors import FlowAlreadyStartedError, FlowNotActiveOrNotFoundError
from dexcli.sdk.options import ResolvedOptions, resolve_wait_options
from dexcli.sdk.registry import FlowDefinition, StepSpec
from dexcli.sdk.stream import Stream
from dexcli.store import AttemptOutcome, FlowState, Method, Runnable, StartSettings, StepRecord, StepState, Tx

START_SOURCE = "__start__"


class Fenced(Exception):
    """The attempt no longer owns its step (taken over, or the flow closed): nothing applies."""


@dataclass(frozen=True, slots=True)
class NextStep:
    """A step execution to create: resolved and encoded before anything is written."""

    spec: StepSpec
    input_json: str
    options: ResolvedOptions
    wait_options: ResolvedOptions | None = None  # the wait_for method's, for a step that has one


@dataclass(frozen=True, slots=True)
class Leased:
    """A step whose attempt was leased to this process in the transaction; it starts after COMMIT."""

    step: StepRecord
    run_id: str
    spec: StepSpec
    definition: FlowDefinition
    options: ResolvedOptions  # the leased method's
    queue_counts: dict[str, int] = field(default_factory=dict)  # pending channel messages when leased


def method_options(step: StepRecord) -> ResolvedOptions:
    """The limits of the method the step's attempts run now (wait_for's, or execute's)."""
    if step.method is Method.WAIT_FOR and step.wait_options is not None:
        return ResolvedOptions.from_json(step.wait_options)
    return ResolvedOptions.from_json(step.options)


@dataclass(frozen=True, slots=True)
class Closed:
    status: FlowState
    error_type: str | None = None
    message: str | None = None


# ------------------------------------------------------------------------------ steps -------
def queue_step(tx: Tx, flow_id: str, nxt: NextStep, from_seid: str, now: float, numbers: tuple[int, int],
                owner: str | None = None, recovery_error: dict[str, str] | None = None) -> StepRecord:
    """Insert a step execution, QUEUED, or RUNNING with attempt 1 leased to `owner`."""
    n, seq = numbers
    waits = nxt.spec.has_wait_for
    wait_opts = (nxt.wait_options or resolve_wait_options(nxt.spec.options())) if waits else None
    opts = wait_opts or nxt.options  # the first method's limits
    leased = owner is not None
    step = StepRecord(
        flow_id=flow_id, step_execution_id=f"{nxt.spec.step_type}-{n}", step_type=nxt.spec.step_type, seq=seq,
        from_step_execution_id=from_seid, input=nxt.input_json, options=nxt.options.to_json(),
        status=StepState.RUNNING if leased else StepState.QUEUED, attempt=1 if leased else 0,
        scheduled_at=now, first_attempt_at=now if leased else None,
        next_attempt_at=None if leased else now, lease_owner=owner,
        attempt_started_at=now if leased else None, last_heartbeat_time=None,
        heartbeat_deadline=now + opts.heartbeat_timeout if leased else None,
        attempt_deadline=now + opts.method_timeout if leased else None,
        total_deadline=now + opts.total_duration, heartbeat_value=None, has_heartbeat_value=False,
        recovery_error=json.dumps(recovery_error) if recovery_error else None, decision=None, end_time=None,
        method=Method.WAIT_FOR if waits else Method.EXECUTE,
        wait_options=wait_opts.to_json() if wait_opts is not None else None)
    tx.insert_step(step)
    if owner is not None:
        tx.insert_attempt(flow_id, step.step_execution_id, 1, owner, now, step.method.value)
    return step


# ------------------------------------------------------------------------------ start -------
@dataclass(frozen=True, slots=True)
class StartRequest:
    definition: FlowDefinition
    start: NextStep
    flow_id: str
    flow_ref: str | None
    request_id: str | None
    ignore_already_started: bool
    settings: StartSettings = StartSettings()  # timeout, start delay, id reuse policy


@dataclass(frozen=True, slots=True)
class Started:
    run_id: str
    created: bool  # False: the same request had already started it
    leased: Leased | None = None
    terminated: Closed | None = None  # the previous run, terminated by ALLOW_TERMINATE_IF_RUNNING


def start(tx: Tx, req: StartRequest, now: float, owner: str | None = None) -> Started:
    """Create the flow and queue its start step (leased to `owner` when given, unless it has a
    start delay). A taken flow id is refused before anything is written (or answered with the
    existing run for the same request id under ignore_already_started), unless the id reuse
    policy lets a new run replace the old one (dexcli.engine.id_reuse)."""
    run_id, request_id, s = str(uuid.uuid4()), req.request_id or str(uuid.uuid4()), req.settings
    args = (req.flow_id, run_id, req.definition.flow_type, req.flow_ref, req.start.input_json, request_id, now)
    previous = None
    if not tx.insert_flow_if_new(*args):
        from dexcli.engine.id_reuse import allows, make_room  # id_reuse builds on this module

        existing = tx.get_flow(req.flow_id)
        assert existing is not None
        if not allows(s.id_reuse_policy or "DEFAULT", existing):
            if req.ignore_already_started and req.request_id and existing.request_id == req.request_id:
                return Started(existing.run_id, False)
            raise FlowAlreadyStartedError(
                f"flow {req.flow_id} already exists ({existing.status.value}, {existing.flow_type})")
        previous = make_room(tx, existing, s.id_reuse_policy or "DEFAULT", run_id, now)
        tx.insert_flow_if_new(*args)
    if not s.is_default:
        tx.set_start_settings(req.flow_id, s, now)
    delay = s.start_delay or 0.0
    if previous is not None:  # never lease at once: an outcome of the old run's same-named step is still fenced
        owner = None
    step = queue_step(tx, req.flow_id, req.start, START_SOURCE, now + delay, (1, 1), None if delay else owner)
    tx.add_event(req.flow_id, now, "FlowStarted", {
        "flowType": req.definition.flow_type, "runId": run_id, "startStepType": req.start.spec.step_type,
        "startStepExecutionId": step.step_execution_id, "input": json.loads(req.start.input_json),
        **_start_options(s, now), **({"previousRunId": previous.previous_run_id} if previous else {}),
    })
    leased = None if owner is None or delay else \
        Leased(step, run_id, req.start.spec, req.definition, req.start.options)
    return Started(run_id, True, leased, previous.terminated if previous else None)


def _start_options(s: StartSettings, now: float) -> dict[str, Any]:
    """The start options FlowStarted records (only those given)."""
    out: dict[str, Any] = {}
    if s.timeout:
        out.update(timeout=s.timeout, timeoutPolicy=s.timeout_policy, timeoutTime=iso(now + s.timeout))
    if s.start_delay:
        out.update(startDelay=s.start_delay, startStepEligibleTime=iso(now + s.start_delay))
    if s.id_reuse_policy not in (None, "DEFAULT"):
        out["idReusePolicy"] = s.id_reuse_policy
    return out


# ------------------------------------------------------------------------------ lease -------
def lease(tx: Tx, r: Runnable, definition: FlowDefinition, spec: StepSpec, owner: str, now: float) -> Leased | None:
    """Lease the next attempt of a runnable step, if nobody else did first."""
    opts = method_options(r.step)
    hb_deadline, at_deadline = now + opts.heartbeat_timeout, now + opts.method_timeout
    if not tx.lease_step(r.step, owner, now, hb_deadline, at_deadline):
        return None
    attempt = r.step.attempt + 1
    tx.insert_attempt(r.step.flow_id, r.step.step_execution_id, attempt, owner, now, r.step.method.value)
    step = _replace_step(r.step, status=StepState.RUNNING, attempt=attempt, lease_owner=owner,
                         attempt_started_at=now, first_attempt_at=r.step.first_attempt_at or now,
                         heartbeat_deadline=hb_deadline, attempt_deadline=at_deadline, next_attempt_at=None,
                         last_heartbeat_time=None)
    counts = tx.queue_counts(r.step.flow_id) if definition.channels else {}
    return Leased(step, r.run_id, spec, definition, opts, counts)


def _replace_step(step: StepRecord, **changes: Any) -> StepRecord:
    return replace(step, **changes)


# ------------------------------------------------------------------------------ heartbeat ---
@dataclass
class Outputs:
    """An attempt's heartbeats and Stream messages since its last commit."""

    last_time: float = 0.0
    checkpoint: tuple[bool, str | None] | None = None  # (has value, JSON) when set or cleared
    heartbeats: int = 0
    streams: list[tuple[Stream[Any], str, float, int]] = field(default_factory=list)  # (stream, JSON, at, size)


@dataclass(frozen=True, slots=True)
class AttemptKey:
    flow_id: str
    seid: str
    attempt: int
    owner: str


def heartbeat(tx: Tx, key: AttemptKey, flow_type: str, heartbeat_timeout: float,
              out: Outputs) -> list[int | None] | None:
    """Record an attempt's outputs. Returns each Stream message's resume token (None: it could
    never fit and was dropped), or None when the attempt is fenced (nothing written)."""
    if not tx.record_heartbeat(key.flow_id, key.seid, key.owner, key.attempt, out.last_time,
                               out.last_time + heartbeat_timeout, out.checkpoint):
        return None
    tokens = [tx.append_stream(flow_type, stream.name, key.flow_id, f"#{key.seid}", text, at, size,
                               stream.stream_capacity_bytes)
              for stream, text, at, size in out.streams]
    tx.bump_attempt_counters(key.flow_id, key.seid, key.attempt, out.heartbeats, len(out.streams), out.last_time)
    return tokens


# ------------------------------------------------------------------------------ release -----
def release(tx: Tx, key: AttemptKey, now: float) -> bool:
    """This process stops cleanly while the attempt runs: the attempt ends INTERRUPTED and its
    step is runnable again at once (the next attempt reads the last checkpoint). An interrupted
    attempt does not count against maximum_attempts. False when the attempt was no longer ours."""
    if not tx.release_step(key.flow_id, key.seid, key.owner, key.attempt, now):
        return False
    tx.end_attempt(key.flow_id, key.seid, key.attempt, now, AttemptOutcome.INTERRUPTED, None,
                   "its process stopped (Ctrl-C, SIGTERM or a closed output); the step runs again on resume")
    return True


# ------------------------------------------------------------------------------ close -------
def close(tx: Tx, flow_id: str, now: float, closed: Closed, completions: str | None = None,
          open_steps: bool = True) -> None:
    """End the flow: its open steps cancelled (`open_steps=False`: the caller counted none),
    FlowClosed with the collected results. A flow that has already ended is left as it is."""
    if not tx.close_flow(flow_id, closed.status, now, closed.error_type, closed.message, completions):
        return
    if open_steps:
        tx.cancel_open_steps(flow_id, now)
    if completions is None:
        flow = tx.get_flow(flow_id)
        completions = flow.completions if flow else "[]"
    tx.add_event(flow_id, now, "FlowClosed", {"flowStatus": closed.status.value, "errorType": closed.error_type,
                                              "errorMessage": closed.message, "results": json.loads(completions)})


_STOPS = {"CANCEL": Closed(FlowState.CANCELED), "TERMINATE": Closed(FlowState.TERMINATED),
          "FAIL": Closed(FlowState.FAILED, "CLIENT_API_FAILED")}


def stop(tx: Tx, flow_id: str, stop_type: str, reason: str | None, now: float) -> Closed:
    """A client stops a running flow: CANCEL, TERMINATE or FAIL."""
    flow = tx.get_flow(flow_id)
    if flow is None or not flow.is_running:
        state = "not found" if flow is None else f"already {flow.status.value}"
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is {state}")
    kind = _STOPS[stop_type]
    close(tx, flow_id, now, Closed(kind.status, kind.error_type, reason or f"stopped ({stop_type.lower()})"))
    return Closed(kind.status, kind.error_type, reason)


# ------------------------------------------------------------------------------ reap --------
def reap(tx: Tx, seen: StepRecord, definitions: Definitions, now: float) -> tuple[Failure, Failed] | None:
    """Declare lost an attempt of another process whose first deadline has passed, if it is
    still as `seen` (then the retry policy goes on, as for any failed attempt)."""
    fresh = tx.get_step(seen.flow_id, seen.step_execution_id)
    if (fresh is None or fresh.status is not StepState.RUNNING or fresh.attempt != seen.attempt
            or fresh.lease_owner != seen.lease_owner):
        return None
    assert fresh.attempt_deadline is not None and fresh.heartbeat_deadline is not None
    at, kind = earliest_deadline(fresh.attempt_deadline, fresh.heartbeat_deadline, fresh.total_deadline)
    opts = method_options(fresh)
    failure = Failure(kind, timeout_detail(kind, opts), at, AttemptOutcome.LOST)
    try:
        return failure, fail(tx, fresh, fresh.lease_owner, failure, definitions, now)
    except Fenced:
        return None




# ------------------------------------------------------------------------------ complete ----
@dataclass(frozen=True, slots=True)
class Decision:
    """A handler's decision, checked and encoded: its kind, next steps, output JSON, reason."""

    kind: DecisionKind
    next_steps: tuple[NextStep, ...]
    output: Any  # JSON-ready value, when has_output
    has_output: bool
    reason: str | None
    cancels: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())  # (flow-wide, sibling) step types
    empty_channels: tuple[str, ...] = ()  # force_complete_if_channels_empty: completes only if these are empty


@dataclass(frozen=True, slots=True)
class Completed:
    summary: dict[str, Any]  # the decision as history and `dex inspect` show it
    closed: Closed | None
    leased: tuple[Leased, ...]


def complete(tx: Tx, key: AttemptKey, step: StepRecord, started: float, decision: Decision,
             definition: FlowDefinition, now: float, lease_next: bool,
             extra: dict[str, Any] | None = None) -> Completed:
    """Apply an attempt's decision: create its next steps (their first attempts leased to this
    owner with `lease_next`), collect its output, record StepExecuteCompleted, and close the
    flow when the decision or an idle graceful completion ends it."""
    plan = decision.next_steps
    numbered = tx.get_flow_numbering(key.flow_id, plan[0].spec.step_type) if plan else None
    flow = numbered[0] if numbered else tx.get_flow(key.flow_id)
    if flow is None or not flow.is_running:
        raise Fenced()
    owner = key.owner if lease_next else None
    created = []
    for i, nxt in enumerate(plan):
        numbers = (numbered[1] + 1, numbered[2] + 1) if numbered and i == 0 else \
            tx.next_step_number(key.flow_id, nxt.spec.step_type)
        created.append(queue_step(tx, key.flow_id, nxt, key.seid, now, numbers, owner))
    summary = _summary(decision, created)
    if not tx.complete_step(key.flow_id, key.seid, key.owner, key.attempt, json.dumps(summary), now):
        raise Fenced()
    tx.end_attempt(key.flow_id, key.seid, key.attempt, now, AttemptOutcome.COMPLETED)
    completions = _collect(flow.completions, decision, step)
    tx.add_event(key.flow_id, now, "StepExecuteCompleted", {
        "stepExecutionId": key.seid, "fromStepExecutionId": step.from_step_execution_id,
        "stepType": step.step_type, "attempt": key.attempt, "startedTime": iso(started),
        "duration": round(now - started, 6), "decision": summary, **(extra or {}),
    })
    graceful = flow.graceful or decision.kind is DecisionKind.GRACEFUL_COMPLETE
    closed, idle = _closing(tx, key.flow_id, decision, graceful)
    if closed is not None:
        close(tx, key.flow_id, now, closed, completions or flow.completions, open_steps=not idle)
        return Completed(summary, closed, ())
    if completions is not None or graceful != flow.graceful:
        tx.set_flow_outputs(key.flow_id, completions, graceful)
    leased = tuple(Leased(s, flow.run_id, n.spec, definition, n.options) for s, n in zip(created, plan, strict=True)) \
        if lease_next else ()
    return Completed(summary, None, leased)


def _summary(decision: Decision, created: list[StepRecord]) -> dict[str, Any]:
    summary: dict[str, Any] = {"kind": decision.kind.value}
    if created:
        pairs = zip(created, decision.next_steps, strict=True)
        summary["next"] = [{"stepType": s.step_type, "stepExecutionId": s.step_execution_id,
                            "input": json.loads(n.input_json)} for s, n in pairs]
    if decision.has_output:
        summary["output"] = decision.output
    if decision.reason is not None:
        summary["reason"] = decision.reason
    return summary


def _collect(completions: str, decision: Decision, step: StepRecord) -> str | None:
    """The flow's collected outputs with this decision's added, or None when it adds none."""
    if not decision.has_output or decision.kind not in (DecisionKind.GRACEFUL_COMPLETE, DecisionKind.FORCE_COMPLETE):
        return None
    items = json.loads(completions)
    items.append({"stepType": step.step_type, "stepExecutionId": step.step_execution_id, "output": decision.output})
    return json.dumps(items)


def _closing(tx: Tx, flow_id: str, decision: Decision, graceful: bool) -> tuple[Closed | None, bool]:
    """(how the flow closes now, or None; whether it is idle, i.e. has no open step)."""
    if decision.kind is DecisionKind.FORCE_COMPLETE:
        return Closed(FlowState.COMPLETED), False
    if decision.kind is DecisionKind.FORCE_FAIL:
        return Closed(FlowState.FAILED, "STEP_DECISION_FAILED", decision.reason), False
    if graceful and tx.active_step_count(flow_id) == 0:
        return Closed(FlowState.COMPLETED), True
    return None, False


# ------------------------------------------------------------------------------ fail --------
@dataclass(frozen=True, slots=True)
class Failure:
    error_type: str  # `module.QualName`, or a timeout kind
    detail: str
    at: float  # when it failed (a deadline, for timeouts)
    outcome: AttemptOutcome = AttemptOutcome.FAILED
    delay_override: float | None = None  # retry_after
    fatal: bool = False  # retrying cannot help: the flow fails with INVALID_USER_FLOW_CODE
    stack_trace: str | None = None  # the user code's traceback, innermost frame first


@dataclass(frozen=True, slots=True)
class Failed:
    retry: bool
    next_attempt_at: float | None = None
    delay: float | None = None
    reason: str | None = None  # why no retry: fatal, attempts exhausted, TotalDuration spent
    recovery_step_execution_id: str | None = None
    closed: Closed | None = None


def fail(tx: Tx, step: StepRecord, owner: str | None, failure: Failure, definitions: Definitions,
         now: float) -> Failed:
    """Record a failed attempt of `step` (as it was when the attempt started); schedule the
    retry, or once none is left route to the execute-failure step or fail the flow."""
    opts = method_options(step)
    flow = tx.get_flow(step.flow_id)
    if flow is None or not flow.is_running:
        raise Fenced()
    f, seid, attempt = failure, step.step_execution_id, step.attempt
    # interrupted attempts do not count; each method counts its own attempts
    tries = step.method_attempt - tx.interrupted_attempts(step.flow_id, seid, step.method_base)
    delay = f.delay_override if f.delay_override is not None else opts.delay_after(tries)
    attempts_left = opts.attempts_left(tries)
    time_left = (f.at + delay) - step.scheduled_at < opts.total_duration
    if not f.fatal and attempts_left and time_left:
        next_at = max(f.at + delay, now)
        if not tx.backoff_step(step.flow_id, seid, owner, attempt, next_at):
            raise Fenced()
        tx.end_attempt(step.flow_id, seid, attempt, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
        return Failed(True, next_at, delay)
    why = "fatal" if f.fatal else ("attempts exhausted" if not attempts_left else "TotalDuration spent")
    proceed = step.method is Method.WAIT_FOR and opts.wait_for_failure == "PROCEED" and not f.fatal
    if proceed:
        from dexcli.engine.waiting import proceed_after_wait_failure  # waiting builds on this module
        tx.end_attempt(step.flow_id, seid, attempt, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
        _failed_event(tx, step, f, why, None)
        proceed_after_wait_failure(tx, step, definitions, now)
        return Failed(False, reason=why)
    if not tx.fail_step(step.flow_id, seid, owner, attempt, f.at):
        raise Fenced()
    tx.end_attempt(step.flow_id, seid, attempt, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
    recovery_id = None
    if opts.failure_step and not f.fatal and step.method is Method.EXECUTE:
        recovery_id = _recover(tx, flow.flow_type, flow.flow_ref, step, opts, f, definitions)
    _failed_event(tx, step, f, why, recovery_id)
    if recovery_id is not None:
        return Failed(False, reason=why, recovery_step_execution_id=recovery_id)
    tries_text = f"{step.method_attempt} attempt{'s' if step.method_attempt != 1 else ''}"
    method = "wait_for" if step.method is Method.WAIT_FOR else ""
    if f.fatal:
        closed = Closed(FlowState.FAILED, "INVALID_USER_FLOW_CODE", f"{seid}: {f.detail}")
    else:
        closed = Closed(FlowState.FAILED, "WORKER_API_FAILED",
                        f"{seid}{' ' + method if method else ''} failed after {tries_text} "
                        f"({why}): {f.error_type}: {f.detail}")
    close(tx, step.flow_id, f.at, closed)
    return Failed(False, reason=why, closed=closed)


def _failed_event(tx: Tx, step: StepRecord, f: Failure, why: str, recovery_id: str | None) -> None:
    """StepExecuteFailed (or StepWaitForFailed): the method failed for good."""
    kind = "StepWaitForFailed" if step.method is Method.WAIT_FOR else "StepExecuteFailed"
    tx.add_event(step.flow_id, f.at, kind, {
        "stepExecutionId": step.step_execution_id, "fromStepExecutionId": step.from_step_execution_id,
        "stepType": step.step_type, "attempt": step.method_attempt, "errorType": f.error_type, "detail": f.detail,
        "reason": why, "recoveryStepExecutionId": recovery_id, "stackTrace": f.stack_trace,
    })


def _recover(tx: Tx, flow_type: str, flow_ref: str | None, step: StepRecord, opts: ResolvedOptions,
             f: Failure, definitions: Definitions) -> str:
    """Queue the execute-failure step with the failed step's input and its error."""
    assert opts.failure_step is not None
    definition = definitions.get(flow_type, flow_ref)
    spec = definition.steps[opts.failure_step]
    rec_opts = opts.failure_step_options or definitions.options(definition, spec)
    nxt = NextStep(spec, step.input or "null", rec_opts)
    numbers = tx.next_step_number(step.flow_id, spec.step_type)
    return queue_step(tx, step.flow_id, nxt, step.step_execution_id, f.at, numbers,
                       recovery_error={"detail": f.detail, "error_type": f.error_type}).step_execution_id
