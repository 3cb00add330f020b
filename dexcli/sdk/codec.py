"""Values as JSON through pydantic, and the official SDK's codec API. No pickle.

Which types a step may take is the official SDK's rule: `CodecRegistry.resolve` gives a codec
for the same built-ins (str, bool, int, float, bytes, None, datetime, dataclasses, Enums,
parameterized list/tuple/dict) and for the type hints registered in it, and refuses the rest
with the SDK's words ("no codec for dict; register one in CodecRegistry").

dex stores every value as JSON text. Built-in types go through pydantic (`to_jsonable`,
`from_jsonable`). A type hint with a custom codec goes through that codec: its `Value` is kept
as JSON (a JSON codec's document as is, a primitive codec's data as that JSON value) and
decoded by the codec. `Registry` makes its CodecRegistry's custom codecs the ones this process
uses (`use_codecs`): in dex they apply process-wide, the last registry's winning for a type.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dexcli.sdk.errors import ValueMappingError

if TYPE_CHECKING:  # pydantic loads on first use: `dex --help` should not pay for it
    from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")


class WireKind(enum.Enum):
    """How a codec's `Value` is represented (the official SDK's wire kinds)."""

    STRING = "string"
    BOOL = "bool"
    INT64 = "int64"
    DOUBLE = "double"
    BYTES = "bytes"
    JSON = "json"


@dataclass(frozen=True)
class Value:
    """One encoded value: its wire kind and its data (JSON text for WireKind.JSON)."""

    kind: WireKind
    data: str | bool | int | float | bytes


class Codec(Protocol[T]):
    """Converts one Python type to and from a `Value`. It must be deterministic: equal values
    encode to equal Values (a replay reads what the first run wrote)."""

    @property
    def type_name(self) -> str: ...

    @property
    def wire_kind(self) -> WireKind: ...

    def encode(self, value: T) -> Value: ...

    def decode(self, value: Value) -> T: ...


@dataclass(frozen=True)
class _Primitive(Generic[T]):
    """A built-in codec of one exact Python type carried as one primitive wire kind."""

    type_name: str
    wire_kind: WireKind
    python_type: type
    check: Callable[[Any], None] | None = None

    def _checked(self, data: Any) -> Any:
        if type(data) is not self.python_type:
            raise TypeError(f"{self.type_name} requires {self.python_type.__name__}, got {type(data).__name__}")
        if self.check is not None:
            self.check(data)
        return data

    def encode(self, value: T) -> Value:
        return Value(self.wire_kind, self._checked(value))

    def decode(self, value: Value) -> T:
        if value.kind is not self.wire_kind:
            raise TypeError(f"{self.type_name} cannot decode wire kind {value.kind.value}")
        result: T = self._checked(value.data)
        return result


def _int64(n: int) -> None:
    if not -(2**63) <= n < 2**63:
        raise OverflowError(f"integer {n} exceeds int64")


def _finite(x: float) -> None:
    if not math.isfinite(x):
        raise ValueError("non-finite floating-point values are unsupported")


STRING: Codec[str] = _Primitive("str", WireKind.STRING, str)
BOOL: Codec[bool] = _Primitive("bool", WireKind.BOOL, bool)
INT64: Codec[int] = _Primitive("int", WireKind.INT64, int, _int64)
DOUBLE: Codec[float] = _Primitive("float", WireKind.DOUBLE, float, _finite)
BYTES: Codec[bytes] = _Primitive("bytes", WireKind.BYTES, bytes)


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class JsonCodec(Generic[T]):
    """A codec that carries a type as canonical JSON (sorted keys, compact, no NaN):
    `encoder` turns a value into JSON-compatible data, `decoder` turns parsed JSON back into
    the type; `expected_type`, when given, is checked before encoding."""

    type_name: str
    decoder: Callable[[Any], T]
    encoder: Callable[[T], Any] = field(default=_identity)
    expected_type: object | None = None
    wire_kind: WireKind = field(default=WireKind.JSON, init=False)

    def encode(self, value: T) -> Value:
        expected = self.expected_type
        if isinstance(expected, type) and typing.get_origin(expected) is None and type(value) is not expected:
            raise TypeError(f"{self.type_name} requires {codec_type_name(expected)}, got {type(value).__name__}")
        return Value(WireKind.JSON, json.dumps(self.encoder(value), allow_nan=False, separators=(",", ":"),
                                               sort_keys=True))

    def decode(self, value: Value) -> T:
        if value.kind is not WireKind.JSON or not isinstance(value.data, str):
            raise TypeError(f"{self.type_name} requires a JSON value")
        return self.decoder(json.loads(value.data))


# The official SDK's built-in codecs: these exact types, dataclasses, Enums, and parameterized
# list/tuple/dict (its Mapping/Sequence test compares typing's aliases with an origin, which
# never matches, so Mapping[...] and Sequence[...] have no codec there, nor here).
_JSON_ORIGINS: tuple[Any, ...] = (list, tuple, dict, typing.Mapping, typing.Sequence)


class _NoneCodec:
    type_name = "None"
    wire_kind = WireKind.JSON

    def encode(self, value: None) -> Value:
        if value is not None:
            raise TypeError("None codec requires None")
        return Value(WireKind.JSON, "null")

    def decode(self, value: Value) -> None:
        if value.kind is not WireKind.JSON or value.data != "null":
            raise TypeError("None codec requires JSON null")


class _DateTimeCodec:
    type_name = "datetime"
    wire_kind = WireKind.STRING

    def encode(self, value: datetime) -> Value:
        if not isinstance(value, datetime):
            raise TypeError("datetime codec requires datetime")
        return Value(WireKind.STRING, value.isoformat())

    def decode(self, value: Value) -> datetime:
        if value.kind is not WireKind.STRING or not isinstance(value.data, str):
            raise TypeError("datetime codec requires a string value")
        return datetime.fromisoformat(value.data)


def _builtin(type_hint: object) -> Codec[Any] | None:
    """The official SDK's built-in codec for a type hint, or None. Structured types are carried by
    dex's pydantic JSON (`to_jsonable` / `from_jsonable`)."""
    primitives: dict[object, Codec[Any]] = {str: STRING, bool: BOOL, int: INT64, float: DOUBLE, bytes: BYTES}
    primitive = primitives.get(type_hint)
    if primitive is not None:
        return primitive
    if type_hint is type(None):
        return _NoneCodec()
    if type_hint is datetime:
        return _DateTimeCodec()
    structured = typing.get_origin(type_hint) in _JSON_ORIGINS or (
        isinstance(type_hint, type) and (dataclasses.is_dataclass(type_hint) or issubclass(type_hint, enum.Enum)))
    if structured:
        return JsonCodec(codec_type_name(type_hint), lambda data: from_jsonable(data, type_hint), to_jsonable,
                         type_hint)
    return None


class CodecRegistry:
    """The codecs for the type hints of a Registry's definitions: `codecs` (keyed by the exact
    type hint, copied) first, then the official SDK's built-ins.

        Registry([orders], CodecRegistry({Money: JsonCodec("Money", Money.parse, str, Money)}))
    """

    def __init__(self, codecs: Mapping[object, Codec[Any]] | None = None) -> None:
        self._codecs: dict[object, Codec[Any]] = dict(codecs or {})

    def custom(self) -> dict[object, Codec[Any]]:
        """The codecs registered here (dexcli only: what `Registry` makes this process use)."""
        return dict(self._codecs)

    def resolve(self, type_hint: object) -> Codec[Any]:
        """The codec for `type_hint`; TypeError when there is none (the official wording)."""
        codec = self._codecs.get(type_hint)
        if codec is None:
            codec = _builtin(type_hint)
        if codec is None:
            raise TypeError(f"no codec for {codec_type_name(type_hint)}; register one in CodecRegistry")
        return codec


def codec_problem(tp: Any, codecs: CodecRegistry | None = None) -> str | None:
    """Why `codecs` (the built-ins without it) has no codec for type hint `tp`, or None."""
    try:
        (codecs or CodecRegistry()).resolve(tp)
    except TypeError as exc:
        return str(exc)
    return None


# --- custom codecs in use: values of these type hints go through their codec ------------------

_custom: dict[object, Codec[Any]] = {}


def use_codecs(codecs: CodecRegistry) -> None:
    """Make `codecs`' custom codecs the ones values of their type hints are encoded and decoded
    with in this process (Registry calls it)."""
    _custom.update(codecs.custom())


def _custom_codec(tp: Any) -> Codec[Any] | None:
    if not _custom:
        return None
    try:
        return _custom.get(tp)
    except TypeError:  # an unhashable type expression
        return None


def _to_json_data(codec: Codec[Any], value: Any) -> Any:
    try:
        encoded = codec.encode(value)
    except Exception as exc:
        raise ValueMappingError(f"cannot encode {type(value).__name__} with the {codec.type_name} codec: "
                                f"{exc}") from exc
    if encoded.kind is WireKind.JSON:
        return json.loads(str(encoded.data))
    if encoded.kind is WireKind.BYTES:
        return to_jsonable(encoded.data)
    return encoded.data


def _from_json_data(codec: Codec[Any], data: Any) -> Any:
    kind = codec.wire_kind
    if kind is WireKind.JSON:
        raw: Any = json.dumps(data, allow_nan=False, separators=(",", ":"), sort_keys=True)
    else:
        raw = from_jsonable(data, bytes) if kind is WireKind.BYTES else data
    try:
        return codec.decode(Value(kind, raw))
    except Exception as exc:
        raise ValueMappingError(f"the {codec.type_name} codec cannot decode {data!r}: {exc}") from exc


def _fallback(value: Any) -> Any:
    codec = _custom_codec(type(value))
    if codec is None:
        raise TypeError(f"{type(value).__name__} has no codec")
    return _to_json_data(codec, value)


# --- JSON ------------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    if value is None or type(value) in (str, int, float, bool):
        return value
    codec = _custom_codec(type(value))
    if codec is not None:
        return _to_json_data(codec, value)
    import pydantic_core

    try:
        return pydantic_core.to_jsonable_python(value, fallback=_fallback if _custom else None)
    except (pydantic_core.PydanticSerializationError, TypeError) as exc:
        raise ValueMappingError(f"cannot encode {type(value).__name__} as JSON: {exc}") from exc


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)  # json.dumps builds one per call


def _encoder() -> Callable[[Any], str]:
    """`_ENCODER.encode` without the C encoder it builds on every call: one, made once, with no
    circular-reference check (what it encodes comes from `to_jsonable`, which builds new,
    acyclic data)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder as it is
        return _ENCODER.encode
    iterencode = make(None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True)

    def encode(value: Any) -> str:
        try:
            return "".join(iterencode(value, 0))
        except RecursionError:  # a circular value after all: the full encoder's own error for it
            return _ENCODER.encode(value)

    return encode


_encode_jsonable = _encoder()


def encode(value: Any) -> str:
    """JSON text of a value."""
    return _encode_jsonable(to_jsonable(value))


def encode_jsonable(data: Any) -> str:
    """JSON text of data `to_jsonable` already returned (`encode` without converting it again)."""
    return _encode_jsonable(data)


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


_SCALARS = (int, float, str, bool)


def from_jsonable(data: Any, tp: Any) -> Any:
    """Decode plain JSON data into `tp` (Any or None type returns it unchanged).

    Strictly, as JSON types say, like the official SDK's codec: `true` is no int, `1` no bool,
    `"5"` and `5.0` no int (pydantic's lax Python mode takes them all, True as 1). Dataclasses,
    Enums, datetimes and bytes are still read from their JSON forms (objects, values, strings).
    JSON null is None whatever the type, as there: the official SDK encodes None as a null value
    for any codec and decodes a null value as None without asking the codec."""
    if data is None or tp is Any:
        return data
    codec = _custom_codec(tp)
    if codec is not None:
        return _from_json_data(codec, data)
    if type(data) is tp and tp in _SCALARS:  # already what strict validation would return
        return data
    from pydantic import ValidationError

    try:
        if tp in _SCALARS:  # no JSON text to make: strict Python mode is JSON's rules for these
            return adapter(tp).validate_python(data, strict=True)
        return adapter(tp).validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise ValueMappingError(describe_validation_error(exc, tp)) from exc


def decode(text: str | None, tp: Any = Any) -> Any:
    if text is None:
        return None
    return from_jsonable(json.loads(text), tp)


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
