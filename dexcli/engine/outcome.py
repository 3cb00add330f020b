"""What an ended attempt amounts to: a checked decision to commit, a failure to record, or
nothing (it was fenced). Pure: no writes, no events.

  - a deadline fired: the timeout kind (StartToClose, Heartbeat, ScheduleToClose), TIMED_OUT;
  - fenced (or it raised AttemptFencedError): nothing, its owner moved on;
  - FlowCodeError / NotSupportedYetError: fatal, retrying cannot help;
  - an AttributeError on an object of dex (a sync Context's `heartbeat`, an SDK method dex does
    not implement): fatal, with the missing API named;
  - RetryAfter: a failure of its cause, retried after its delay instead of the backoff;
  - any other exception: a transient failure, the retry policy decides;
  - a return value: it must be a StepDecision whose movements name registered steps with
    inputs of their types; otherwise it is a failure like any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dexcli.engine.attempt import AttemptRun
from dexcli.engine.deadlines import timeout_detail
from dexcli.engine.definitions import Definitions
from dexcli.engine.subflows import child_starts
from dexcli.engine.transitions import Decision, Failure, NextStep
from dexcli.engine.transitions.subflows import ChildStart
from dexcli.engine.user_code import missing_api, user_stack
from dexcli.engine.waits import persist
from dexcli.sdk.codec import encode, encode_jsonable, from_jsonable, to_jsonable
from dexcli.sdk.decisions import RetryAfter, StepDecision
from dexcli.sdk.errors import (
    AttemptFencedError,
    FlowCodeError,
    InvalidStepResultError,
    NotSupportedYetError,
    ValueMappingError,
)
from dexcli.sdk.options import resolve_wait_options
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import AttemptOutcome, Method

MAX_DETAIL = 1024


def error_identity(exc: BaseException) -> tuple[str, str]:
    """(`module.QualName`, detail) as the Dex Python SDK reports a handler's exception."""
    cls = type(exc)
    etype = f"{cls.__module__}.{cls.__qualname__}"[:256]
    detail = (str(exc) or cls.__name__)[:MAX_DETAIL]
    return etype, detail


@dataclass(frozen=True, slots=True)
class WaitResult:
    """A wait_for attempt's Wait, in its persisted form (timers' firing times fixed at `now`)."""

    wait: dict[str, Any]
    children: tuple[ChildStart, ...] = ()  # its SubFlows' starts, committed with it


def judge(run: AttemptRun, result: Any, error: BaseException | None, definitions: Definitions,
          now: float) -> Decision | WaitResult | Failure | None:
    if run.timed_out is not None:
        at, kind = run.timed_out
        return Failure(kind, timeout_detail(kind, run.opts), at, AttemptOutcome.TIMED_OUT)
    if run.ended() or isinstance(error, AttemptFencedError):
        return None
    if error is not None:
        return _failure(error, now)
    try:
        if run.method is Method.WAIT_FOR:
            subflows: list[Any] = []
            wait = persist(result, run.definition.channels, now, subflows)
            return WaitResult(wait, child_starts(definitions, run.flow_id, run.seid, subflows) if subflows else ())
        return check_decision(run, result, definitions)
    except (InvalidStepResultError, ValueMappingError) as exc:
        return Failure(*error_identity(exc), now)
    except (NotSupportedYetError, FlowCodeError) as exc:  # retrying cannot help
        return Failure(*error_identity(exc), now, fatal=True)


def _failure(error: BaseException, now: float) -> Failure:
    stack = user_stack(error)
    if isinstance(error, (NotSupportedYetError, FlowCodeError)):
        return Failure(*error_identity(error), now, fatal=True, stack_trace=stack)
    missing = missing_api(error) if isinstance(error, AttributeError) else None
    if missing is not None:
        return Failure(error_identity(error)[0], missing, now, fatal=True, stack_trace=stack)
    if isinstance(error, RetryAfter):
        cause = error.cause if error.cause is not None else error
        return Failure(*error_identity(cause), now, delay_override=error.seconds,
                       stack_trace=user_stack(cause) or stack)
    return Failure(*error_identity(error), now, stack_trace=stack)


def check_decision(run: AttemptRun, decision: Any, definitions: Definitions) -> Decision:
    """Check a decision before anything is written; resolve and encode its movements."""
    if not isinstance(decision, StepDecision):
        raise InvalidStepResultError(f"{run.spec.step_type}.execute returned {type(decision).__name__}, "
                                     "not a StepDecision")
    definition = run.definition
    movements = decision.movements if decision.fallback is None else (decision.fallback,)
    next_steps = [next_step(m, run.spec.step_type, definition, definitions) for m in movements]
    output = None
    if decision.has_output:
        output = to_jsonable(decision.output)
        encode_jsonable(output)  # it encodes (converted once: `encode` would convert it again)
    cancels = _cancels(run, decision) if decision.canceling_steps or decision.canceling_sibling_steps else _NO_CANCELS
    return Decision(decision.kind, tuple(next_steps), output, decision.has_output, decision.reason, cancels,
                    _channel_names(run, decision) if decision.empty_channels else ())


_NO_CANCELS: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())


def next_step(m: Any, moved_from: str, definition: FlowDefinition, definitions: Definitions) -> NextStep:
    """A movement (from a step's decision or an RPC's result) as the step execution to create:
    a registered step, its input encoded as its type, its options resolved."""
    spec = definition.resolve(getattr(m, "step", None))
    if spec is None:
        target = getattr(m, "step", m)
        name = target.__name__ if isinstance(target, type) else type(target).__name__
        raise InvalidStepResultError(f"{moved_from} moved to {name}, which is not a registered step "
                                     f"of {definition.flow_type}")
    try:
        input_json = encode(from_jsonable(to_jsonable(m.input), spec.input_type))
    except ValueMappingError as exc:
        raise InvalidStepResultError(f"input for {spec.step_type}: {exc}") from None
    wait_opts = resolve_wait_options(m.options or spec.options()) if spec.has_wait_for else None
    return NextStep(spec, input_json, definitions.options(definition, spec, m.options), wait_opts)


def _cancels(run: AttemptRun, decision: StepDecision) -> tuple[frozenset[str], frozenset[str]]:
    """The step types cancelled flow-wide and among siblings, checked against the flow."""
    def types(classes: tuple[type[Any], ...], what: str) -> frozenset[str]:
        out = set()
        for cls in classes:
            spec = run.definition.resolve(cls)
            if spec is None:
                raise InvalidStepResultError(f"{run.spec.step_type}: {what}({cls.__name__}) names a step that is "
                                             f"not registered in {run.definition.flow_type}")
            out.add(spec.step_type)
        return frozenset(out)

    return (types(decision.canceling_steps, "with_canceling_steps"),
            types(decision.canceling_sibling_steps, "with_canceling_sibling_steps"))


def _channel_names(run: AttemptRun, decision: StepDecision) -> tuple[str, ...]:
    names = []
    for ch in decision.empty_channels:
        declared = run.definition.channels.get(getattr(ch, "name", ""))
        if declared is None:
            raise InvalidStepResultError(f"force_complete_if_channels_empty: {getattr(ch, 'name', ch)!r} is not a "
                                         f"channel of {run.definition.flow_type}")
        names.append(declared.name)
    return tuple(names)
