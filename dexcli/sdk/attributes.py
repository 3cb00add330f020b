"""Attributes: typed values a flow owns. dex defines them (flows that declare them register,
graph and lint) but does not run them yet: using one inside a handler fails the flow at once
with a clear "not yet" error instead of being ignored."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dexcli.sdk.errors import NotSupportedYetError

T = TypeVar("T")


def _not_yet(what: str) -> NotSupportedYetError:
    return NotSupportedYetError(f"{what} is defined but dex does not run Attributes yet")


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
