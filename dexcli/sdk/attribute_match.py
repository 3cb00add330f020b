"""AttributeMatch: the scalar predicate `wait_for_attribute_match` waits for (Dex's names).

String and bool attributes take the equality operators; int and float ones every operator. A
missing attribute never matches (`not_equal_to` too: it needs a value that differs).
"""

from __future__ import annotations

import enum
import math
import operator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from dexcli.sdk.attributes import Attribute, AttributeMap
from dexcli.sdk.wait_options import WaitForAttributeOptions

ValueT = TypeVar("ValueT")


class MatchOperator(enum.IntEnum):
    EQUAL = 1
    NOT_EQUAL = 2
    GREATER_THAN = 3
    GREATER_THAN_OR_EQUAL = 4
    LESS_THAN = 5
    LESS_THAN_OR_EQUAL = 6


_TESTS = {MatchOperator.EQUAL: operator.eq, MatchOperator.NOT_EQUAL: operator.ne,
          MatchOperator.GREATER_THAN: operator.gt, MatchOperator.GREATER_THAN_OR_EQUAL: operator.ge,
          MatchOperator.LESS_THAN: operator.lt, MatchOperator.LESS_THAN_OR_EQUAL: operator.le}


@dataclass(frozen=True)
class AttributeMatch(Generic[ValueT]):
    _operator: MatchOperator
    _operand: ValueT

    @classmethod
    def equal_to(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.EQUAL, operand)

    @classmethod
    def not_equal_to(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.NOT_EQUAL, operand)

    @classmethod
    def greater_than(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.GREATER_THAN, operand)

    @classmethod
    def greater_than_or_equal(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.GREATER_THAN_OR_EQUAL, operand)

    @classmethod
    def less_than(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.LESS_THAN, operand)

    @classmethod
    def less_than_or_equal(cls, operand: ValueT) -> AttributeMatch[ValueT]:
        return cls(MatchOperator.LESS_THAN_OR_EQUAL, operand)


def check_match(match: Any) -> AttributeMatch[Any]:
    """Refuse what the official client refuses before it sends the wait."""
    if not isinstance(match, AttributeMatch):
        raise TypeError("wait_for_attribute_match requires an AttributeMatch")
    operand = match._operand
    if not isinstance(operand, (str, bool, int, float)):
        raise ValueError("AttributeMatch supports only string, boolean, integer, or float operands")
    ordering = match._operator >= MatchOperator.GREATER_THAN
    if ordering and (isinstance(operand, (str, bool))):
        raise ValueError("AttributeMatch ordering requires an integer or float operand")
    if isinstance(operand, float) and not math.isfinite(operand):
        raise ValueError("AttributeMatch float operand must be finite")
    return match


def matches(match: AttributeMatch[Any], value: Any) -> bool:
    """Whether a present attribute value satisfies the match (a value of another kind does not)."""
    operand = match._operand
    if isinstance(operand, bool) != isinstance(value, bool):
        return match._operator is MatchOperator.NOT_EQUAL
    if isinstance(operand, (int, float)) and not isinstance(value, (int, float)):
        return match._operator is MatchOperator.NOT_EQUAL
    try:
        return bool(_TESTS[match._operator](value, operand))
    except TypeError:
        return False


def wait_arguments(attribute: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, Any, Any]:
    """(instance, match, options) of `wait_for_attribute_match(flow_id, attribute, [instance,]
    match, options)`, positional or by name, checked as the official client checks them."""
    if isinstance(attribute, Attribute):
        names: tuple[str, ...] = ("match", "options")
    elif isinstance(attribute, AttributeMap):
        names = ("instance", "match", "options")
    else:
        raise TypeError("wait_for_attribute_match received invalid arguments")
    given = dict(zip(names, args, strict=False))
    if len(args) > len(names) or any(k not in names or k in given for k in kwargs):
        raise TypeError("wait_for_attribute_match received invalid arguments")
    given.update(kwargs)
    if set(given) != set(names) or not isinstance(given["options"], WaitForAttributeOptions):
        raise TypeError("wait_for_attribute_match received invalid arguments")
    instance = given.get("instance")
    if isinstance(attribute, AttributeMap) and not isinstance(instance, str):
        raise TypeError("wait_for_attribute_match received invalid arguments")
    if getattr(attribute, "hard_delete_on_null", False):
        raise ValueError(f"wait_for_attribute_match does not support hard-delete Attribute {attribute.name}")
    return instance, check_match(given["match"]), given["options"]
