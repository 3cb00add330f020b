"""JSON from the command line (`--input`, `--input @file`, `--attribute`, `--equals`), read
within bounds; and `dex run --input` checked against the flow's start step before anything
starts: when it does not fit, say which type the flow takes and show an input that would.

Bounds: an @file holds at most 64 MiB of UTF-8; a value nests at most 100 levels; numbers are
finite and at most 4300 digits (Python's own limit); strings are valid Unicode (no lone
surrogate, which no database or terminal can take). Each breach is a UsageError (exit 2).

The check is the engine's own (dexcli.sdk.codec decodes the value into the step's input type);
this module only words the error: `three-steps needs --input of type int (e.g. --input 5)`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import shlex
import sys
import typing
from datetime import datetime
from pathlib import Path
from typing import Any

from dexcli.cli.errors import UsageError
from dexcli.sdk.codec import from_jsonable, to_jsonable
from dexcli.sdk.errors import ValueMappingError
from dexcli.sdk.registry import FlowDefinition

_MAX_DEPTH = 4  # of a made-up example
MAX_INPUT_BYTES = 64 * 1024 * 1024
MAX_JSON_DEPTH = 100


def read_input(text: str | None, flag: str = "--input") -> Any:
    """`--input`'s JSON value, given inline or as `@file` (None when not given)."""
    if text is None:
        return None
    if text.startswith("@"):
        return load_json(_read_file(Path(text[1:]).expanduser(), flag), flag)
    return load_json(text, flag, _quote_hint(text, flag))


def _quote_hint(text: str, flag: str) -> str:
    """For a bare word that is not JSON (the shell ate its quotes): how to quote it."""
    word = text.strip()
    if word and not word.startswith(("{", "[", '"')) and not any(c in word for c in "'\n\\"):
        return f"; a string is quoted in JSON: {flag} '{json.dumps(word, ensure_ascii=False)}'"
    return ""


def _read_file(path: Path, flag: str) -> str:
    """The file's text: at most MAX_INPUT_BYTES (one byte more is read to tell), UTF-8."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{flag}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{flag}: {path} is larger than {MAX_INPUT_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{flag}: {path} is not UTF-8 text (byte {exc.start})") from None


def load_json(text: str, what: str, hint: str = "") -> Any:
    """`text` as a JSON value within the bounds above; UsageError `<what> is not valid JSON: ...`."""
    def no_constant(name: str) -> Any:
        raise UsageError(f"{what}: {name} is not a JSON number")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno}){hint}") from None
    except RecursionError:
        raise UsageError(f"{what}: the JSON nests deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError:  # an integer over Python's limit (sys.get_int_max_str_digits(), 4300)
        raise UsageError(f"{what}: a number in the JSON has more than {sys.get_int_max_str_digits()} digits") from None
    _check_value(value, what)
    return value


def _check_value(value: Any, what: str) -> None:
    """Depth, finite numbers and valid strings, walked without recursion (a deep value must not
    be what overflows the stack)."""
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, str):
            _check_text(v, what)
        elif isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{what}: a number in the JSON is out of range (finite numbers only)")
        elif isinstance(v, (list, dict)):
            if depth > MAX_JSON_DEPTH:
                raise UsageError(f"{what}: the JSON nests deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(v, dict):
                for k in v:
                    _check_text(k, what)
                todo.extend((x, depth + 1) for x in v.values())
            else:
                todo.extend((x, depth + 1) for x in v)


def _check_text(s: str, what: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what}: the JSON holds a lone surrogate (\\u{ord(s[exc.start]):04x}), "
                         "which is not a character") from None


def check_input(flow_name: str, definition: FlowDefinition, value: Any, given: bool) -> None:
    """Raise a UsageError (exit 2) unless `value` fits the start step's input type."""
    start = definition.start_step
    if start is None:
        if value is not None:  # the official client's own refusal
            raise UsageError(f"{flow_name} takes no --input (it has no start step: RPCs start its steps); "
                             "leave --input out")
        return
    tp = start.input_type
    if tp is not None and not given:  # JSON null fits any type, but a missing --input is a slip
        raise UsageError(f"{flow_name} needs --input of type {type_label(tp)}{_example_hint(tp)}")
    try:
        from_jsonable(to_jsonable(value), tp)
    except ValueMappingError as exc:
        if tp is None:
            raise UsageError(f"{flow_name} takes no --input (its start step {start.step_type} takes None); "
                             "leave --input out") from None
        wanted = f"{flow_name} needs --input of type {type_label(tp)}{_example_hint(tp)}"
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
