"""WaitFor primitives, Attributes and RPC definitions.

dex defines these so flows that use them import, register and can be graphed. Running a
WaitFor, Channel, Attribute or RPC raises NotSupportedYetError with a clear message.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Generic, TypeVar

from dexcli.sdk.errors import NotSupportedYetError

T = TypeVar("T")


def _not_yet(what: str) -> NotSupportedYetError:
    return NotSupportedYetError(f"{what} is defined but dex does not run it yet")


@dataclass(frozen=True)
class Timer:
    duration: timedelta
    condition_id: str | None = None

    @classmethod
    def by_duration(cls, duration: timedelta, *, condition_id: str | None = None) -> Timer:
        if duration.total_seconds() < 0 or duration.total_seconds() != int(duration.total_seconds()):
            raise ValueError("Timer.by_duration needs a whole, non-negative number of seconds")
        return cls(duration, condition_id)


@dataclass(frozen=True)
class ChannelCondition:
    channel: Any
    at_least: int | None
    at_most: int | None
    instance: str | None = None
    condition_id: str | None = None


@dataclass(frozen=True)
class Channel(Generic[T]):
    name: str
    value_type: Any

    def for_one(self, *, condition_id: str | None = None) -> ChannelCondition:
        return ChannelCondition(self, 1, 1, condition_id=condition_id)

    def for_n(self, n: int, *, condition_id: str | None = None) -> ChannelCondition:
        return ChannelCondition(self, n, n, condition_id=condition_id)

    def at_least(self, n: int, *, condition_id: str | None = None) -> ChannelCondition:
        return ChannelCondition(self, n, None, condition_id=condition_id)

    def at_most(self, n: int, *, condition_id: str | None = None) -> ChannelCondition:
        return ChannelCondition(self, None, n, condition_id=condition_id)

    def for_range(self, at_least: int | None = None, at_most: int | None = None, *,
                  condition_id: str | None = None) -> ChannelCondition:
        return ChannelCondition(self, at_least, at_most, condition_id=condition_id)

    def publish(self, context: Any, value: T) -> None:
        raise _not_yet(f"Channel {self.name!r}.publish")

    def results(self, context: Any) -> list[T]:
        raise _not_yet(f"Channel {self.name!r}.results")

    def size(self, context: Any) -> int:
        raise _not_yet(f"Channel {self.name!r}.size")


@dataclass(frozen=True)
class ChannelMap(Generic[T]):
    name: str
    value_type: Any

    def publish(self, context: Any, instance: str, value: T) -> None:
        raise _not_yet(f"ChannelMap {self.name!r}.publish")


@dataclass(frozen=True)
class ConditionCombination:
    conditions: tuple[Any, ...]

    @classmethod
    def of(cls, *conditions: Any) -> ConditionCombination:
        return cls(tuple(conditions))


@dataclass(frozen=True)
class Wait:
    mode: str
    conditions: tuple[Any, ...] = ()

    @classmethod
    def until(cls, condition: Any) -> Wait:
        return cls("all_of", (condition,))

    @classmethod
    def all_of(cls, *conditions: Any) -> Wait:
        return cls("all_of", conditions)

    @classmethod
    def any_of(cls, *conditions: Any) -> Wait:
        return cls("any_of", conditions)

    @classmethod
    def any_combination_of(cls, *combinations: ConditionCombination) -> Wait:
        return cls("any_combination_of", combinations)

    @classmethod
    def skip_immediately(cls) -> Wait:
        return cls("skip", ())


class IndexType(enum.Enum):
    KEYWORD = "keyword"
    FULL_TEXT = "full_text"
    KEYWORD_ARRAY = "keyword_array"
    INT = "int"
    DOUBLE = "double"
    BOOL = "bool"
    DATETIME = "datetime"


@dataclass(frozen=True)
class AttributeIndex:
    type: IndexType
    index_key: str = ""


@dataclass(frozen=True)
class AttributeLock:
    attribute: Any
    instance: str | None = None


@dataclass(frozen=True)
class Attribute(Generic[T]):
    name: str
    value_type: Any
    index: AttributeIndex | None = None
    sync_to_attribute_store: bool = False
    hard_delete_on_null: bool = False

    def get(self, context: Any) -> T:
        raise _not_yet(f"Attribute {self.name!r}.get")

    def set(self, context: Any, value: T) -> None:
        raise _not_yet(f"Attribute {self.name!r}.set")

    def delete(self, context: Any) -> None:
        raise _not_yet(f"Attribute {self.name!r}.delete")

    def lock(self) -> AttributeLock:
        return AttributeLock(self)


@dataclass(frozen=True)
class AttributeMap(Generic[T]):
    name: str
    value_type: Any
    index: AttributeIndex | None = None

    def lock(self, instance: str) -> AttributeLock:
        if not instance:
            raise ValueError(f"AttributeMap {self.name!r}.lock needs an instance")
        return AttributeLock(self, instance)


@dataclass(frozen=True)
class SubFlow:
    flow: Any
    input: Any = None
    options: Any = None

    @classmethod
    def run(cls, flow: Any, input: Any = None, options: Any = None) -> SubFlow:
        return cls(flow, input, options)


@dataclass(frozen=True)
class RPCResult(Generic[T]):
    output: Any = None
    next_steps: tuple[Any, ...] = ()
    canceling_steps: tuple[Any, ...] = ()


@dataclass(frozen=True)
class _RpcSpec:
    name: str | None = None
    timeout: timedelta | None = None
    lock_attributes: tuple[Any, ...] = field(default=())
    is_transactional: bool = False


def rpc(func: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """Marks a Flow method as an RPC. dex records it; invoking RPCs is not supported yet."""

    def mark(f: Callable[..., Any]) -> Callable[..., Any]:
        f.__dex_rpc__ = _RpcSpec(**kwargs)  # type: ignore[attr-defined]
        return f

    return mark(func) if func is not None else mark
