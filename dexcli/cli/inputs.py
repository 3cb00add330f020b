"""`dex run --input`: check it against the flow's start step before anything starts, and when it
does not fit, say which type the flow takes and show an input that would.

The check is the engine's own (dexcli.sdk.codec decodes the value into the step's input type);
this module only words the error: `three-steps needs --input of type int (e.g. --input 5)`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import shlex
import typing
from datetime import datetime
from typing import Any

from dexcli.cli.errors import UsageError
from dexcli.sdk.codec import from_jsonable, to_jsonable
from dexcli.sdk.errors import ValueMappingError
from dexcli.sdk.registry import FlowDefinition

_MAX_DEPTH = 4


def check_input(flow_name: str, definition: FlowDefinition, value: Any, given: bool) -> None:
    """Raise a UsageError (exit 2) unless `value` fits the start step's input type."""
    start = definition.start_step
    if start is None:
        return  # the engine refuses a flow without a start step, in its own words
    tp = start.input_type
    try:
        from_jsonable(to_jsonable(value), tp)
    except ValueMappingError as exc:
        if tp is None:
            raise UsageError(f"{flow_name} takes no --input (its start step {start.step_type} takes None); "
                             "leave --input out") from None
        wanted = f"{flow_name} needs --input of type {type_label(tp)}{_example_hint(tp)}"
        if not given:
            raise UsageError(wanted) from None
        raise UsageError(f"{wanted}: got {json.dumps(value)[:60]}: {_detail(exc)}") from None


def type_label(tp: Any) -> str:
    """`int`, `Order`, `list[int]`, `dict[str, Order]`."""
    if typing.get_origin(tp) is not None:
        return str(tp).replace("typing.", "").replace(f"{getattr(tp, '__module__', '')}.", "")
    return str(getattr(tp, "__qualname__", None) or tp)


def example_input(tp: Any, depth: int = 0) -> Any:
    """A JSON value of type `tp` (None when none can be made up)."""
    simple: dict[Any, Any] = {bool: True, int: 5, float: 1.5, str: "text", bytes: "text",
                              datetime: "2026-01-01T12:00:00Z"}
    if tp in simple:
        return simple[tp]
    if depth > _MAX_DEPTH:
        return None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return next(iter(tp)).value if len(tp) else None
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return {f.name: example_input(hints.get(f.name, Any), depth + 1) for f in dataclasses.fields(tp)}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (list, typing.Sequence, set, frozenset):
        return [example_input(args[0], depth + 1)] if args else []
    if origin is tuple:
        return [example_input(a, depth + 1) for a in args if a is not Ellipsis]
    if origin in (dict, typing.Mapping):
        if not args:
            return {}
        key = example_input(args[0], depth + 1)
        return {key if isinstance(key, str) else json.dumps(key): example_input(args[1], depth + 1)}
    return None


def _example_hint(tp: Any) -> str:
    """` (e.g. --input 5)`, or nothing when no example that fits can be made up."""
    try:
        value = example_input(tp)
        from_jsonable(value, tp)
    except Exception:  # noqa: BLE001 - an example is a courtesy: never fail the message over it
        return ""
    return f" (e.g. --input {shlex.quote(json.dumps(value))})"


def _detail(exc: ValueMappingError) -> str:
    """Pydantic's first complaint, with the field it is about: `at field 'qty': Input should be
    a valid integer`."""
    text = str(exc)
    prefix, sep, rest = text.partition(": ")
    if sep and prefix.startswith("value does not fit"):
        where = prefix.partition(" at field ")[2]
        return f"at field {where}: {rest}" if where else rest
    return text
