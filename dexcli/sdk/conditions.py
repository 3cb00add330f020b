"""What a step's `wait_for` returns: a Wait over Conditions (Timers, Channels, SubFlows), and
the ids a client uses to address a step execution and its timers. Names as Dex's SDK.

A Wait is persisted when `wait_for` returns; the engine re-evaluates it whenever something it
depends on changes (a publish, a timer, a skip) and runs `execute` once it is ready.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from typing import Any


def require_name(name: str, what: str = "durable name") -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"{what} is required")
    return name


def check_definition_name(name: str) -> str:
    require_name(name)
    if "/" in name:
        raise ValueError("persistence definition names must not contain '/'")
    return name


def check_instance(instance: str) -> str:
    require_name(instance, "map instance")
    if "/" in instance:
        raise ValueError("map instances must not contain '/'")
    return instance


@dataclass(frozen=True)
class Condition:
    condition_id: str | None = None

    def __post_init__(self) -> None:
        if self.condition_id is not None and not self.condition_id:
            raise ValueError("condition ID must not be empty")


@dataclass(frozen=True)
class TimerCondition(Condition):
    duration: timedelta = timedelta(0)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.duration < timedelta(0):
            raise ValueError("timer duration must not be negative")


@dataclass(frozen=True)
class ChannelCondition(Condition):
    channel: Any = None  # Channel or ChannelMap
    instance: str | None = None
    at_least: int | None = None
    at_most: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.channel is None:
            raise ValueError("channel condition requires a channel")
        if self.instance is not None:
            check_instance(self.instance)
        if self.at_least is None and self.at_most is None:
            raise ValueError("channel condition requires a bound")
        if self.at_least is not None and self.at_least < 0:
            raise ValueError("at_least must not be negative")
        if self.at_most is not None and self.at_most < 0:
            raise ValueError("at_most must not be negative")
        if self.at_least is not None and self.at_most is not None and self.at_most < self.at_least:
            raise ValueError("at_most must not be below at_least")


@dataclass(frozen=True)
class SubFlowCondition(Condition):
    flow: Any = None
    input: object = None
    options: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.flow is None:
            raise ValueError("SubFlow condition requires a Flow")


@dataclass(frozen=True)
class ConditionCombination:
    """Conditions that must become ready together (one alternative of any_combination_of)."""

    conditions: tuple[Condition, ...]

    @staticmethod
    def of(*conditions: Condition) -> ConditionCombination:
        return ConditionCombination(tuple(conditions))


class WaitKind(enum.Enum):
    SKIP_IMMEDIATELY = "skip_immediately"
    ALL_OF = "all_of"
    ANY_OF = "any_of"
    ANY_COMBINATION_OF = "any_combination_of"


@dataclass(frozen=True)
class Wait:
    """The durable conditions evaluated before a step's `execute` runs.

    any_of picks, among ready conditions, the first in canonical order: Timers, then Channels,
    then SubFlows (argument order within a kind); only the selected condition consumes channel
    messages. any_combination_of does the same with whole combinations (argument order).
    """

    kind: WaitKind
    conditions: tuple[Condition, ...] = ()
    combinations: tuple[ConditionCombination, ...] = ()

    @staticmethod
    def skip_immediately() -> Wait:
        return Wait(WaitKind.SKIP_IMMEDIATELY)

    @staticmethod
    def until(condition: Condition) -> Wait:
        return Wait.all_of(condition)

    @staticmethod
    def all_of(*conditions: Condition) -> Wait:
        return Wait(WaitKind.ALL_OF, tuple(conditions))

    @staticmethod
    def any_of(*conditions: Condition) -> Wait:
        return Wait(WaitKind.ANY_OF, tuple(conditions))

    @staticmethod
    def any_combination_of(*combinations: ConditionCombination) -> Wait:
        return Wait(WaitKind.ANY_COMBINATION_OF, combinations=tuple(combinations))


class Timer:
    """Durable timers: ready `duration` after the wait was committed (no worker waits)."""

    @staticmethod
    def by_duration(duration: timedelta, *, condition_id: str | None = None) -> Condition:
        return TimerCondition(condition_id=condition_id, duration=duration)


class SubFlow:
    """A child flow as a condition of a Wait, and what `execute` reads of it.

    `run` starts (or, by the options' reuse policy, reuses) the child when the wait is
    committed, in the same transaction; the child is a flow of its own, with the id
    `SubFlow:<parentFlowId>-<stepExecutionId>-<index>` (index: the SubFlow's order among the
    wait's SubFlow conditions). The condition is ready once the child has ended, however it
    ended (completed, failed, canceled, terminated): the result says which. The parent's end
    does not stop the child.
    """

    @staticmethod
    def run(flow: Any, input: object, options: Any = None) -> Condition:
        # options None: SubFlowOptions() (the engine reads None so)
        return SubFlowCondition(condition_id=getattr(options, "condition_id", None), flow=flow, input=input,
                                options=options)

    @staticmethod
    def get_condition_results(context: Any, index: int = 0) -> Any:
        """The index-th SubFlow's FlowResult, during `execute`: the child's end (status,
        completions, error), or a RUNNING snapshot for a child still running when another
        condition of an any_of won."""
        return SubFlow._hook(context, "_sub_flow_result")(index)

    @staticmethod
    def get_flow_id(context: Any, index: int = 0) -> str:
        """The index-th SubFlow's flow id (usable with Client.stop_flow for an any_of loser)."""
        flow_id: str = SubFlow._hook(context, "_sub_flow_id")(index)
        return flow_id

    @staticmethod
    def _hook(context: Any, name: str) -> Any:
        hook = getattr(context, name, None)
        if hook is None:
            raise TypeError("SubFlow access requires a Dex invocation Context")
        return hook


@dataclass(frozen=True)
class StepExecutionId:
    """One numbered execution of a step type: StepExecutionId("Approve", 1) is `Approve-1`."""

    step_type: str
    number: int = 1

    def __str__(self) -> str:
        return f"{self.step_type}-{self.number}"


@dataclass(frozen=True)
class TimerId:
    """A timer of a waiting step: by its condition id, or by its 0-based index among the wait's timers."""

    condition_id: str | None = None
    condition_index: int | None = None

    def __post_init__(self) -> None:
        if (self.condition_id is None) == (self.condition_index is None):
            raise ValueError("TimerId requires exactly one selector")
        if self.condition_index is not None and self.condition_index < 0:
            raise ValueError("timer condition index must not be negative")

    @staticmethod
    def by_condition_id(condition_id: str) -> TimerId:
        require_name(condition_id)
        return TimerId(condition_id=condition_id)

    @staticmethod
    def by_condition_index(condition_index: int) -> TimerId:
        return TimerId(condition_index=condition_index)
