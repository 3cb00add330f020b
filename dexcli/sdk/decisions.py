"""StepDecision and its factories: what a handler returns to move the flow on.

Names and signatures are the official SDK's (`go_to(step, input)`, `StepMovement.of(step, input,
*, options=None)`, `retry_after(after_seconds, cause)`). Steps are addressed by their class, as
the official worker does: a step instance, a name or anything else fails the call at once with a
FlowCodeError (the flow fails with INVALID_USER_FLOW_CODE) where a Dex worker would fail when it
dispatches the decision, and retry it.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dexcli.sdk.errors import FlowCodeError, InvalidStepResultError
from dexcli.sdk.omitted import OMITTED

if TYPE_CHECKING:
    from dexcli.sdk.options import StepOptions

InputT = TypeVar("InputT")


class DecisionKind(enum.Enum):
    NEXT = "goTo"
    GRACEFUL_COMPLETE = "gracefulComplete"
    FORCE_COMPLETE = "forceComplete"
    FORCE_FAIL = "forceFail"
    DEAD_END = "deadEnd"
    FORCE_COMPLETE_IF_CHANNELS_EMPTY = "forceCompleteIfChannelsEmpty"


def require_step_class(step: Any, what: str) -> type:
    """`step` if it is a Step class; otherwise the FlowCodeError that says how to address it."""
    from dexcli.sdk.flow import Step

    if isinstance(step, type) and issubclass(step, Step):
        return step
    if isinstance(step, Step):
        cls = type(step).__name__
        raise FlowCodeError(f"{what} takes a Step class, not an instance: {cls}, not a {cls} object "
                            f"(e.g. go_to({cls}, input), not go_to(self.step, input)); a Dex worker cannot "
                            "dispatch an instance")
    raise FlowCodeError(f"{what} takes a Step class of the flow, got {type(step).__name__} {step!r}")


@dataclass(frozen=True)
class StepMovement(Generic[InputT]):
    """One step to schedule: the destination Step class, its input and optional StepOptions."""

    step: type[Any]
    input: InputT
    options: StepOptions | None = None

    def __post_init__(self) -> None:
        require_step_class(self.step, "StepMovement")

    @staticmethod
    def of(step: type[Any], input: InputT, *, options: StepOptions | None = None) -> StepMovement[InputT]:
        return StepMovement(step, input, options)


def _union(existing: tuple[type[Any], ...], added: tuple[Any, ...], what: str) -> tuple[type[Any], ...]:
    combined = list(existing)
    for step in added:
        cls = require_step_class(step, what)
        if all(cls is not current for current in combined):
            combined.append(cls)
    return tuple(combined)


@dataclass(frozen=True)
class StepDecision:
    kind: DecisionKind
    movements: tuple[StepMovement[Any], ...] = ()
    output: Any = OMITTED
    reason: str | None = None
    canceling_steps: tuple[type[Any], ...] = field(default=())
    canceling_sibling_steps: tuple[type[Any], ...] = field(default=())
    empty_channels: tuple[Any, ...] = field(default=())  # force_complete_if_channels_empty
    fallback: StepMovement[Any] | None = None
    def with_canceling_steps(self, *steps: type[Any]) -> StepDecision:
        """Also cancel every current execution of these Step classes (the union of repeated
        calls; flow-wide selection supersedes sibling selection of the same class)."""
        flow_wide = _union(self.canceling_steps, steps, "with_canceling_steps")
        siblings = tuple(s for s in self.canceling_sibling_steps if all(s is not g for g in flow_wide))
        return dataclasses.replace(self, canceling_steps=flow_wide, canceling_sibling_steps=siblings)

    def with_canceling_sibling_steps(self, *steps: type[Any]) -> StepDecision:
        """Also cancel the executions of these Step classes started by the same step execution."""
        siblings = _union(self.canceling_sibling_steps, steps, "with_canceling_sibling_steps")
        siblings = tuple(s for s in siblings if all(s is not g for g in self.canceling_steps))
        return dataclasses.replace(self, canceling_sibling_steps=siblings)

    @property
    def has_output(self) -> bool:
        return self.output is not OMITTED


def go_to(step: type[Any], input: Any) -> StepDecision:
    """Schedule one next step: its class and its input (per-movement options: go_to_many)."""
    return go_to_many(StepMovement.of(step, input))


def go_to_many(*movements: StepMovement[Any]) -> StepDecision:
    if not movements:
        raise InvalidStepResultError("go_to_many needs at least one StepMovement")
    for m in movements:
        if not isinstance(m, StepMovement):
            raise InvalidStepResultError(
                f"go_to_many takes StepMovement.of(...) values, got {type(m).__name__}"
            )
    return StepDecision(DecisionKind.NEXT, tuple(movements))


def graceful_complete(output: Any = OMITTED) -> StepDecision:
    return StepDecision(DecisionKind.GRACEFUL_COMPLETE, output=output)


def force_complete(output: Any = OMITTED) -> StepDecision:
    return StepDecision(DecisionKind.FORCE_COMPLETE, output=output)


def force_fail(reason: str) -> StepDecision:
    return StepDecision(DecisionKind.FORCE_FAIL, reason=str(reason))


def dead_end() -> StepDecision:
    return StepDecision(DecisionKind.DEAD_END)


def force_complete_if_channels_empty(output: Any, fallback: StepMovement[Any], *channels: Any) -> StepDecision:
    """Complete the flow with `output` if these Channels (ChannelMaps: every instance) have no
    pending message when the decision commits; otherwise schedule `fallback`."""
    if not channels:
        raise ValueError("force_complete_if_channels_empty needs at least one Channel")
    if not isinstance(fallback, StepMovement):
        raise TypeError("force_complete_if_channels_empty fallback must be a StepMovement")
    return StepDecision(DecisionKind.FORCE_COMPLETE_IF_CHANNELS_EMPTY, output=output,
                        empty_channels=tuple(channels), fallback=fallback)


class RetryAfterError(Exception):
    """Raised from a handler (`raise retry_after(30, err)`): this attempt fails with `cause`, and
    the next one starts after `after_seconds` instead of the retry policy's backoff. The retry
    policy's limits still apply."""

    def __init__(self, after_seconds: int, cause: BaseException) -> None:
        self.after_seconds = after_seconds
        self.cause = cause
        super().__init__(after_seconds, cause)

    def __str__(self) -> str:
        return str(self.cause)

    @property
    def seconds(self) -> float:
        return float(self.after_seconds)


RetryAfter = RetryAfterError  # the engine's name for it


def retry_after(after_seconds: int, cause: BaseException) -> RetryAfterError:
    """The error to raise to retry after `after_seconds` (a positive number of seconds, not a
    timedelta); `cause` is the failure recorded for this attempt."""
    if cause is None:
        raise ValueError("cause is required")
    if isinstance(after_seconds, bool) or not isinstance(after_seconds, (int, float)):
        raise TypeError(f"retry_after takes after_seconds as a number of seconds (retry_after(30, cause)), "
                        f"not {type(after_seconds).__name__}")
    if after_seconds <= 0:
        raise ValueError("after_seconds must be positive")
    return RetryAfterError(after_seconds, cause)
