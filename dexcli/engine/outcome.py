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

from typing import Any

from dexcli.engine.attempt import AttemptRun
from dexcli.engine.deadlines import timeout_detail
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions import Decision, Failure, NextStep
from dexcli.engine.user_code import missing_api, user_stack
from dexcli.sdk.codec import encode, from_jsonable, to_jsonable
from dexcli.sdk.decisions import RetryAfter, StepDecision
from dexcli.sdk.errors import (
    AttemptFencedError,
    FlowCodeError,
    InvalidStepResultError,
    NotSupportedYetError,
    ValueMappingError,
)
from dexcli.store import AttemptOutcome

MAX_DETAIL = 1024


def error_identity(exc: BaseException) -> tuple[str, str]:
    """(`module.QualName`, detail) as the Dex Python SDK reports a handler's exception."""
    cls = type(exc)
    etype = f"{cls.__module__}.{cls.__qualname__}"[:256]
    detail = (str(exc) or cls.__name__)[:MAX_DETAIL]
    return etype, detail


def judge(run: AttemptRun, result: Any, error: BaseException | None, definitions: Definitions,
          now: float) -> Decision | Failure | None:
    if run.timed_out is not None:
        at, kind = run.timed_out
        return Failure(kind, timeout_detail(kind, run.opts), at, AttemptOutcome.TIMED_OUT)
    if run.ended() or isinstance(error, AttemptFencedError):
        return None
    if error is not None:
        return _failure(error, now)
    try:
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
    if decision.canceling_steps or decision.canceling_sibling_steps:
        raise NotSupportedYetError(f"{run.spec.step_type}: with_canceling_steps / with_canceling_sibling_steps: "
                                   "dex does not cancel other step executions yet")
    definition = run.definition
    next_steps = []
    for m in decision.movements:
        spec = definition.resolve(m.step)
        if spec is None:
            name = m.step.__name__ if isinstance(m.step, type) else type(m.step).__name__
            raise InvalidStepResultError(f"{run.spec.step_type} moved to {name}, which is not a registered step "
                                         f"of {definition.flow_type}")
        try:
            input_json = encode(from_jsonable(to_jsonable(m.input), spec.input_type))
        except ValueMappingError as exc:
            raise InvalidStepResultError(f"input for {spec.step_type}: {exc}") from None
        next_steps.append(NextStep(spec, input_json, definitions.options(definition, spec, m.options)))
    output = None
    if decision.has_output:
        encode(decision.output)
        output = to_jsonable(decision.output)
    return Decision(decision.kind, tuple(next_steps), output, decision.has_output, decision.reason)
