"""Values as JSON through pydantic. No pickle.

Which types a step may take is the official SDK's rule (its `CodecRegistry` built-ins):
`codec_problem` refuses the rest at registration, so a flow that registers here registers on a
Dex server too. dexcli has no custom codecs yet (`Registry(codec_registry=...)` is refused).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from dexcli.sdk.errors import ValueMappingError

if TYPE_CHECKING:  # pydantic loads on first use: `dex --help` should not pay for it
    from pydantic import TypeAdapter, ValidationError


def to_jsonable(value: Any) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    import pydantic_core

    try:
        return pydantic_core.to_jsonable_python(value)
    except (pydantic_core.PydanticSerializationError, TypeError) as exc:
        raise ValueMappingError(f"cannot encode {type(value).__name__} as JSON: {exc}") from exc


def encode(value: Any) -> str:
    """JSON text of a value."""
    return json.dumps(to_jsonable(value), separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=512)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    from pydantic import TypeAdapter

    return TypeAdapter(tp)


def adapter(tp: Any) -> TypeAdapter[Any]:
    try:
        return _adapter(tp)
    except TypeError:  # unhashable type expression
        from pydantic import TypeAdapter

        return TypeAdapter(tp)


def from_jsonable(data: Any, tp: Any) -> Any:
    """Decode plain JSON data into `tp` (Any or None type returns it unchanged)."""
    if tp is Any or tp is None and data is None:
        return data
    from pydantic import ValidationError

    try:
        return adapter(tp).validate_python(data)
    except ValidationError as exc:
        raise ValueMappingError(describe_validation_error(exc, tp)) from exc


def decode(text: str | None, tp: Any = Any) -> Any:
    if text is None:
        return None
    return from_jsonable(json.loads(text), tp)


# The official SDK's built-in codecs: these exact types, dataclasses, Enums, and parameterized
# list/tuple/dict (dex.codec.CodecRegistry.resolve; its Mapping/Sequence test compares typing's
# aliases with an origin, which never matches, so Mapping[...] and Sequence[...] have no codec).
_BUILTIN_CODECS: tuple[Any, ...] = (str, bool, int, float, bytes, type(None), datetime)
_JSON_ORIGINS: tuple[Any, ...] = (list, tuple, dict, typing.Mapping, typing.Sequence)


def codec_problem(tp: Any) -> str | None:
    """Why the official SDK has no built-in codec for type hint `tp` (its wording), or None."""
    if tp in _BUILTIN_CODECS:
        return None
    if isinstance(tp, type) and (dataclasses.is_dataclass(tp) or issubclass(tp, enum.Enum)):
        return None
    if typing.get_origin(tp) in _JSON_ORIGINS:
        return None
    return (f"no codec for {codec_type_name(tp)}; register one in CodecRegistry (dex has no custom codecs "
            "yet: use a dataclass, an Enum, a primitive or a parameterized list/tuple/dict)")


def codec_type_name(tp: Any) -> str:
    """A type hint's name as the official SDK's codec errors spell it."""
    return str(getattr(tp, "__qualname__", str(tp)))


def type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp)


def describe_validation_error(exc: ValidationError, tp: Any) -> str:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    where = f" at field '{loc}'" if loc else ""
    return f"value does not fit {type_name(tp)}{where}: {first.get('msg')}"
