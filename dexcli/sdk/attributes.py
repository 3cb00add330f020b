"""Attributes: typed durable values a flow owns. Names and semantics as Dex's SDK.

Reads see a snapshot taken when the handler started (plus its own staged writes); `set` and
`delete` are staged and commit atomically with the handler's result (discarded if it fails).
An unset attribute reads as its type's zero value (False, 0, 0.0) or None. AttributeMap
instances are read only when the step or RPC loads them (`load_attribute_maps`,
`load_attribute_map_instances`), as on a Dex server. Locks (`attr.lock()`) serialize steps and
RPCs that read-modify-write the same value. The context implements the private hooks.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dexcli.sdk.channels import physical_name
from dexcli.sdk.conditions import check_definition_name, check_instance

T = TypeVar("T")


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
    """How an attribute is indexed for `search_flows`: its type and key (default: its name)."""

    type: IndexType
    index_key: str = ""


def index_key(index: AttributeIndex, name: str) -> str:
    """The search key an attribute named `name` is indexed under."""
    return index.index_key or name


def search_keys(attributes: Iterable[Any]) -> set[str]:
    """The search keys a flow's attributes declare (the ones with an index)."""
    return {index_key(a.index, a.name) for a in attributes if getattr(a, "index", None) is not None}


def check_hard_delete(definition: Any) -> None:
    """The official SDK's rules for `hard_delete_on_null`: no index, no Attribute Store sync,
    and a string or object value type (its value is never a number or a bool)."""
    if not definition.hard_delete_on_null:
        return
    if definition.index is not None:
        raise ValueError(f"hard-delete Attribute {definition.name} cannot use an index")
    if definition.sync_to_attribute_store:
        raise ValueError(f"hard-delete Attribute {definition.name} cannot use sync_to_attribute_store")
    if definition.value_type in (bool, int, float):
        raise TypeError(f"hard-delete Attribute {definition.name} supports only string and object values, "
                        f"not {definition.value_type.__name__}")


@dataclass(frozen=True)
class AttributeLock:
    """A lock on an Attribute (or one AttributeMap instance) for a step method or an RPC."""

    attribute: Any
    instance: str | None = None

    def __post_init__(self) -> None:
        if self.instance is not None:
            check_instance(self.instance)

    @property
    def physical_name(self) -> str:
        return physical_name(self.attribute.name, self.instance)


@dataclass(frozen=True)
class AttributeMapLoad:
    """One AttributeMap instance a step or RPC loads into its snapshot."""

    attribute_map: AttributeMap[Any]
    instance: str

    @property
    def physical_name(self) -> str:
        return physical_name(self.attribute_map.name, self.instance)


@dataclass(frozen=True)
class Attribute(Generic[T]):
    name: str
    value_type: Any
    index: AttributeIndex | None = None
    sync_to_attribute_store: bool = False
    hard_delete_on_null: bool = False

    def __post_init__(self) -> None:
        check_definition_name(self.name)
        check_hard_delete(self)

    def get(self, context: Any) -> T:
        """The value in this handler's snapshot (with its own staged writes), or the zero value."""
        return context._get_attribute(self, None)  # type: ignore[no-any-return]

    def set(self, context: Any, value: T) -> None:
        """Stage a value; it commits with the handler's result. Setting None deletes."""
        context._set_attribute(self, None, value)

    def delete(self, context: Any) -> None:
        context._delete_attribute(self, None)

    def lock(self) -> AttributeLock:
        return AttributeLock(self)


@dataclass(frozen=True)
class AttributeMap(Generic[T]):
    name: str
    value_type: Any
    index: AttributeIndex | None = None
    sync_to_attribute_store: bool = False
    hard_delete_on_null: bool = False

    def __post_init__(self) -> None:
        check_definition_name(self.name)
        check_hard_delete(self)
        if self.index is not None and not self.index.index_key:
            raise ValueError(f"AttributeMap {self.name} index needs an explicit index_key")

    def load(self, instance: str) -> AttributeMapLoad:
        return AttributeMapLoad(self, check_instance(instance))

    def get(self, context: Any, instance: str) -> T:
        return context._get_attribute(self, check_instance(instance))  # type: ignore[no-any-return]

    def set(self, context: Any, instance: str, value: T) -> None:
        context._set_attribute(self, check_instance(instance), value)

    def delete(self, context: Any, instance: str) -> None:
        context._delete_attribute(self, check_instance(instance))

    def get_map_size(self, context: Any) -> int:
        return len(self.get_all_instance_keys(context))

    def get_all_instance_keys(self, context: Any) -> tuple[str, ...]:
        """The instances that exist (with this handler's staged writes), ascending."""
        return tuple(context._attribute_map_keys(self))

    def lock(self, instance: str) -> AttributeLock:
        return AttributeLock(self, check_instance(instance))


def initialization(attribute: Any, args: tuple[object, ...]) -> tuple[Any, str | None, Any]:
    """One initial attribute value as `with_attribute` takes it (StartFlowOptions, SubFlowOptions):
    `(attribute, value)`, or `(attribute_map, instance, value)` for an AttributeMap."""
    if isinstance(attribute, Attribute) and len(args) == 1:
        return (attribute, None, args[0])
    if isinstance(attribute, AttributeMap) and len(args) == 2:
        if not isinstance(args[0], str):
            raise TypeError("attribute-map instance must be a string")
        return (attribute, check_instance(args[0]), args[1])
    raise TypeError("with_attribute received invalid arguments")
