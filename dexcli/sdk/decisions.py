"""StepDecision and its factories: what a handler returns to move the flow on."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from dexcli.sdk.errors import InvalidStepResultError


class _Omitted:
    """Marks an output that was not given (distinct from None)."""

    _instance: _Omitted | None = None

    def __new__(cls) -> _Omitted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<omitted>"

    def __bool__(self) -> bool:
        return False


OMITTED: Any = _Omitted()


class DecisionKind(enum.Enum):
    NEXT = "goTo"
    GRACEFUL_COMPLETE = "gracefulComplete"
    FORCE_COMPLETE = "forceComplete"
    FORCE_FAIL = "forceFail"
    DEAD_END = "deadEnd"


@dataclass(frozen=True)
class StepMovement:
    """One step to schedule: a Step class (or the registered instance), its input, options."""

    step: Any
    input: Any = None
    options: Any = None

    @classmethod
    def of(cls, step: Any, input: Any = None, *, options: Any = None) -> StepMovement:
        return cls(step=step, input=input, options=options)


@dataclass(frozen=True)
class StepDecision:
    kind: DecisionKind
    movements: tuple[StepMovement, ...] = ()
    output: Any = OMITTED
    reason: str | None = None
    canceling_steps: tuple[Any, ...] = field(default=())
    canceling_sibling_steps: tuple[Any, ...] = field(default=())

    def with_canceling_steps(self, *steps: Any) -> StepDecision:
        return StepDecision(
            self.kind, self.movements, self.output, self.reason,
            self.canceling_steps + steps, self.canceling_sibling_steps,
        )

    def with_canceling_sibling_steps(self, *steps: Any) -> StepDecision:
        return StepDecision(
            self.kind, self.movements, self.output, self.reason,
            self.canceling_steps, self.canceling_sibling_steps + steps,
        )

    @property
    def has_output(self) -> bool:
        return self.output is not OMITTED


def go_to(step: Any, input: Any = None, *, options: Any = None) -> StepDecision:
    return StepDecision(DecisionKind.NEXT, (StepMovement(step, input, options),))


def go_to_many(*movements: StepMovement) -> StepDecision:
    if not movements:
        raise InvalidStepResultError("go_to_many needs at least one StepMovement")
    for m in movements:
        if not isinstance(m, StepMovement):
            raise InvalidStepResultError(
                f"go_to_many takes StepMovement.of(...) values, got {type(m).__name__}"
            )
    return StepDecision(DecisionKind.NEXT, tuple(movements))


go_to_multi = go_to_many


def graceful_complete(output: Any = OMITTED) -> StepDecision:
    return StepDecision(DecisionKind.GRACEFUL_COMPLETE, output=output)


def force_complete(output: Any = OMITTED) -> StepDecision:
    return StepDecision(DecisionKind.FORCE_COMPLETE, output=output)


def force_fail(reason: str) -> StepDecision:
    return StepDecision(DecisionKind.FORCE_FAIL, reason=str(reason))


def dead_end() -> StepDecision:
    return StepDecision(DecisionKind.DEAD_END)


def force_complete_if_channels_empty(output: Any, fallback: StepMovement, *channels: Any) -> StepDecision:
    from dexcli.sdk.errors import NotSupportedYetError

    raise NotSupportedYetError(
        "force_complete_if_channels_empty needs Channels, which dex does not run yet"
    )


class RetryAfter(Exception):
    """Raise from a handler to fail this attempt and retry after `seconds` instead of backoff.

    The cause is what the failure reports (its type and message). Limits are unchanged.
    """

    def __init__(self, seconds: float, cause: BaseException | None = None) -> None:
        self.seconds = float(seconds)
        self.cause = cause
        super().__init__(str(cause) if cause is not None else f"retry after {seconds} s")


def retry_after(seconds: Any, cause: BaseException | None = None) -> RetryAfter:
    """Build the exception to raise: `raise retry_after(30, err)`. Accepts seconds or timedelta."""
    secs = seconds.total_seconds() if hasattr(seconds, "total_seconds") else float(seconds)
    return RetryAfter(secs, cause)
