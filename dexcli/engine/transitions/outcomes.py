"""What an ended attempt does to its step: complete (the decision applied; complete_execute
with what its handler staged), fail (retry, recovery route or the flow's end), and reap
(another process's expired attempt)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from dexcli.engine.attributes import apply_writes
from dexcli.engine.deadlines import (
    TIMEOUT_ORDER,
    earliest_deadline,
    iso,
    method_options,
    server_timeout_detail,
    timeout_detail,
)
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions.continuing import Continued, when_due
from dexcli.engine.transitions.flows import close
from dexcli.engine.transitions.steps import (
    AttemptKey,
    Closed,
    Fenced,
    Leased,
    NextStep,
    end_call,
    leased,
    queue_step,
)
from dexcli.engine.transitions.waiting import (
    Effects,
    Woken,
    cancel,
    proceed_after_wait_failure,
    publish,
    queues_empty,
    wake_flow,
)
from dexcli.sdk.decisions import DecisionKind
from dexcli.sdk.options import ResolvedOptions
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import AttemptOutcome, FlowState, Method, StepRecord, StepState, Tx, json_object, json_string


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
    summary_json: str  # the decision as history and `dex inspect` show it
    closed: Closed | None
    leased: tuple[Leased, ...]
    created: int = 0  # how many next steps it created
    continued: Continued | None = None  # the continue-as-new its commit made, when it met the threshold

    @property
    def summary(self) -> dict[str, Any]:
        """The decision as a value (decoded when asked: only event listeners need it)."""
        value: dict[str, Any] = json.loads(self.summary_json)
        return value


def complete(tx: Tx, key: AttemptKey, step: StepRecord, started: float, decision: Decision,
             definition: FlowDefinition, now: float, lease_next: bool,
             extra: dict[str, Any] | None = None) -> Completed:
    """Apply an attempt's decision: create its next steps (their first attempts leased to this
    owner with `lease_next`), collect its output, record StepExecuteCompleted, and close the
    flow when the decision or an idle graceful completion ends it."""
    plan = decision.next_steps
    numbered = tx.flow_progress(key.flow_id, plan[0].spec.step_type if plan else None)
    if numbered is None or not numbered[0].is_running:
        raise Fenced()
    flow = numbered[0]
    owner = key.owner if lease_next else None
    created = []
    for i, nxt in enumerate(plan):
        numbers = (numbered[1] + 1, numbered[2] + 1) if i == 0 else \
            tx.next_step_number(key.flow_id, nxt.spec.step_type)
        created.append(queue_step(tx, key.flow_id, nxt, key.seid, now, numbers, owner))
    summary_json = _summary(decision, created)
    if not tx.complete_step(key.flow_id, key.seid, key.owner, key.attempt, summary_json, now):
        raise Fenced()
    end_call(tx, step, now)
    completions = _collect(flow.completions, decision, step)
    tx.add_event(key.flow_id, now, "StepExecuteCompleted", _completed_event(key, step, started, now, summary_json,
                                                                            extra))
    graceful = flow.graceful or decision.kind is DecisionKind.GRACEFUL_COMPLETE
    closed = _forced(decision)
    if closed is not None:
        close(tx, key.flow_id, now, closed, completions or flow.completions)
        return Completed(summary_json, closed, (), len(created))
    if graceful and close(tx, key.flow_id, now, _GRACEFUL, completions or flow.completions, if_idle=True):
        return Completed(summary_json, _GRACEFUL, (), len(created))  # no step left open: the flow completes
    if completions is not None or graceful != flow.graceful:
        tx.set_flow_outputs(key.flow_id, completions, graceful)
    run_id, rolled = flow.run_id, None
    if flow.flow_config is not None:  # its FlowConfig's threshold may roll the run over here
        rolled = when_due(tx, key.flow_id, now)
        run_id = rolled.run_id if rolled is not None else run_id  # the next steps run in the new run
    got = tuple(leased(tx, s, run_id, n.spec, definition, flow.flow_config)
                for s, n in zip(created, plan, strict=True)
                if s.lease_owner is not None) \
        if lease_next else ()
    return Completed(summary_json, None, got, len(created), rolled)


def _summary(decision: Decision, created: list[StepRecord]) -> str:
    """The decision as history and `dex inspect` show it, as JSON text: each next step's input
    is spliced in as it is already encoded."""
    rest: dict[str, Any] = {}
    if decision.has_output:
        rest["output"] = decision.output
    if decision.reason is not None:
        rest["reason"] = decision.reason
    if not created:
        return json_object({"kind": decision.kind.value}, rest)
    nexts = ",".join(f'{{"stepType":{json_string(s.step_type)},"stepExecutionId":{json_string(s.step_execution_id)},'
                     f'"input":{n.input_json}}}' for s, n in zip(created, decision.next_steps, strict=True))
    return json_object(("kind", json_string(decision.kind.value)), ("next", f"[{nexts}]"), rest)


def _completed_event(key: AttemptKey, step: StepRecord, started: float, now: float, summary_json: str,
                     extra: dict[str, Any] | None) -> str:
    """StepExecuteCompleted's payload as JSON text, the same text json_object makes of its
    fields, written out (one per transition: encoding a dict and splicing it cost ~5x as much)."""
    stamp = iso(started)
    text = (f'{{"stepExecutionId":{json_string(key.seid)},'
            f'"fromStepExecutionId":{json_string(step.from_step_execution_id)},'
            f'"stepType":{json_string(step.step_type)},"attempt":{int(key.attempt)},'
            f'"startedTime":{"null" if stamp is None else json_string(stamp)},'
            f'"duration":{round(now - started, 6)!r},"decision":{summary_json}')
    return f"{text},{json_object(extra)[1:]}" if extra else f"{text}}}"


def _collect(completions: str, decision: Decision, step: StepRecord) -> str | None:
    """The flow's collected outputs (a JSON list) with this decision's appended, or None when
    it adds none. The list is extended as text: what it holds is not decoded again. A null
    output adds none, as on a Dex server (its output collector skips null values)."""
    if not decision.has_output or decision.kind not in (DecisionKind.GRACEFUL_COMPLETE, DecisionKind.FORCE_COMPLETE):
        return None
    if decision.output is None:
        return None
    item = json_object({"stepType": step.step_type, "stepExecutionId": step.step_execution_id,
                        "output": decision.output})
    items = completions.strip()
    if items == "[]":
        return f"[{item}]"
    return f"{items[:-1]},{item}]"


_GRACEFUL = Closed(FlowState.COMPLETED)


def _forced(decision: Decision) -> Closed | None:
    """How the decision itself closes the flow, or None."""
    if decision.kind is DecisionKind.FORCE_COMPLETE:
        return Closed(FlowState.COMPLETED)
    if decision.kind is DecisionKind.FORCE_FAIL:
        return Closed(FlowState.FAILED, "STEP_DECISION_FAILED", decision.reason)
    return None


@dataclass(frozen=True, slots=True)
class Failure:
    error_type: str  # `module.QualName`, or a timeout kind
    detail: str
    at: float  # when it failed (a deadline, for timeouts)
    outcome: AttemptOutcome = AttemptOutcome.FAILED
    delay_override: float | None = None  # retry_after
    fatal: bool = False  # retrying cannot help: the flow fails with INVALID_USER_FLOW_CODE
    stack_trace: str | None = None  # the user code's traceback, innermost frame first

    @property
    def server_detail(self) -> str:
        """The detail client code gets, as a Dex server words it: the worker's own for a raised
        exception, Temporal's for a timeout (`detail` keeps dex's account for inspect)."""
        return server_timeout_detail(self.error_type) if self.error_type in TIMEOUT_ORDER else self.detail

    @property
    def recovery_error(self) -> dict[str, str]:
        """The RecoveryErrorInfo a recovery route, or execute after a WaitFor that PROCEEDs, reads."""
        return {"detail": self.server_detail, "error_type": self.error_type}


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
    time_left = f.at + delay < step.total_deadline  # TotalDuration, from when the call began
    if not f.fatal and attempts_left and time_left:
        next_at = max(f.at + delay, now)
        if not tx.backoff_step(step.flow_id, seid, owner, attempt, next_at):
            raise Fenced()
        tx.end_attempt(step.flow_id, seid, attempt, owner, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
        return Failed(True, next_at, delay)  # the call goes on: its locks stay held through the backoff
    end_call(tx, step, now)
    why = "fatal" if f.fatal else ("attempts exhausted" if not attempts_left else "TotalDuration spent")
    proceed = step.method is Method.WAIT_FOR and opts.wait_for_failure == "PROCEED" and not f.fatal
    if proceed:
        tx.end_attempt(step.flow_id, seid, attempt, owner, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
        _failed_event(tx, step, f, why, None)
        proceed_after_wait_failure(tx, step, definitions, now, f.recovery_error)
        return Failed(False, reason=why)
    if not tx.fail_step(step.flow_id, seid, owner, attempt, f.at):
        raise Fenced()
    tx.end_attempt(step.flow_id, seid, attempt, owner, f.at, f.outcome, f.error_type, f.detail, f.stack_trace)
    recovery_id = None
    if opts.failure_step and not f.fatal and step.method is Method.EXECUTE:
        recovery_id = _recover(tx, flow.flow_type, flow.flow_ref, step, opts, f, definitions)
    _failed_event(tx, step, f, why, recovery_id)
    if recovery_id is not None:
        return Failed(False, reason=why, recovery_step_execution_id=recovery_id)
    if f.fatal:
        closed = Closed(FlowState.FAILED, "INVALID_USER_FLOW_CODE", f"{seid}: {f.detail}")
    else:  # which step failed, after how many attempts and why: StepExecuteFailed, beside it
        closed = Closed(FlowState.FAILED, "WORKER_API_FAILED", f.server_detail)
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
                       recovery_error=f.recovery_error).step_execution_id


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


# ------------------------------------------------------------------------------ execute -----
@dataclass(frozen=True, slots=True)
class ExecuteDone:
    """An execute attempt's decision applied with its effects: what completed, which step
    executions it cancelled, which waits its publishes made ready."""

    completed: Completed
    canceled: tuple[str, ...]
    woken: tuple[Woken, ...]


def complete_execute(tx: Tx, key: AttemptKey, step: StepRecord, started: float, decision: Decision,
                     effects: Effects, definitions: Definitions, definition: FlowDefinition, now: float,
                     owner: str | None) -> ExecuteDone:
    """`transitions.complete` with what the handler staged: its publishes appended, the step
    executions it cancels ended, a conditional completion resolved, the decision applied, then
    the flow's waits re-evaluated. One transaction: all of it or (fenced) nothing."""
    if effects.publishes:
        publish(tx, key.flow_id, effects.publishes, f"#{key.seid}", now)
    upserts = apply_writes(tx, key.flow_id, effects.attributes, now, key.seid) if effects.attributes else None
    flow_wide, siblings = decision.cancels
    canceled = cancel(tx, key.flow_id, set(flow_wide), step, set(siblings), {key.seid}, now) \
        if flow_wide or siblings else []
    if decision.kind is DecisionKind.FORCE_COMPLETE_IF_CHANNELS_EMPTY:
        empty = queues_empty(tx, key.flow_id, decision.empty_channels)
        decision = replace(decision, kind=DecisionKind.FORCE_COMPLETE if empty else DecisionKind.NEXT,
                           next_steps=() if empty else decision.next_steps)
    extra: dict[str, Any] = {}
    if effects.events:
        extra["recordEvents"] = effects.events
    if effects.publishes:
        extra["publishes"] = [{"queue": q, "value": json.loads(v)} for q, v in effects.publishes]
    if canceled:
        extra["canceled"] = canceled
    if upserts:
        extra["upsertAttributes"] = upserts
    if effects.locals is not None:
        tx.set_locals(key.flow_id, key.seid, json.dumps(effects.locals))
    done = complete(tx, key, step, started, decision, definition, now, owner is not None, extra)
    woken = wake_flow(tx, key.flow_id, definitions, now, owner) if effects.publishes and done.closed is None else []
    return ExecuteDone(done, tuple(canceled), tuple(woken))
