"""Codecs as the official SDK's: `CodecRegistry` resolves the same built-ins and refuses the rest
with its words; a `Registry(flows, CodecRegistry({T: codec}))` accepts a step input of type T,
and values of T then go through that codec (into the database and back, as inputs and outputs)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import pytest

from dexcli import (
    BOOL,
    BYTES,
    DOUBLE,
    INT64,
    STRING,
    Client,
    CodecRegistry,
    Context,
    Flow,
    FlowDefinitionError,
    FlowStatus,
    JsonCodec,
    Registry,
    Step,
    StepDecision,
    StepList,
    Value,
    ValueMappingError,
    WireKind,
    go_to,
    graceful_complete,
)
from dexcli.engine.clock import Clock
from dexcli.sdk import codec as codec_module


@pytest.fixture(autouse=True)
def own_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Custom codecs apply process-wide: each test starts and ends with none."""
    monkeypatch.setattr(codec_module, "_custom", {})


class Money:
    """A plain class: no built-in codec (not a dataclass, not an Enum)."""

    def __init__(self, cents: int, currency: str) -> None:
        self.cents, self.currency = cents, currency

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and (self.cents, self.currency) == (other.cents, other.currency)

    def __hash__(self) -> int:
        return hash((self.cents, self.currency))


MONEY = JsonCodec("Money", lambda d: Money(d["cents"], d["currency"]), lambda m: vars(m), Money)


@dataclass(frozen=True)
class Point:
    x: int


def test_the_built_in_codecs_are_the_official_ones() -> None:
    codecs = CodecRegistry()
    assert [codecs.resolve(t) for t in (str, bool, int, float, bytes)] == [STRING, BOOL, INT64, DOUBLE, BYTES]
    for tp in (type(None), Point, FlowStatus, list[int], dict[str, Point], tuple[int, ...]):
        assert codecs.resolve(tp).wire_kind is WireKind.JSON
    when = datetime(2026, 1, 2, 3, 4)
    assert codecs.resolve(datetime).encode(when) == Value(WireKind.STRING, "2026-01-02T03:04:00")
    assert codecs.resolve(datetime).decode(Value(WireKind.STRING, "2026-01-02T03:04:00")) == when
    for tp, name in ((dict, "dict"), (Any, "Any"), (object, "object"), (Money, "Money"), (set[int], "set")):
        with pytest.raises(TypeError, match=f"^no codec for {name}; register one in CodecRegistry$"):
            codecs.resolve(tp)


def test_primitive_codecs_check_the_exact_type_and_range() -> None:
    assert STRING.encode("a") == Value(WireKind.STRING, "a")
    assert INT64.decode(Value(WireKind.INT64, 3)) == 3
    with pytest.raises(TypeError, match="bool requires bool, got int"):
        BOOL.encode(1)
    with pytest.raises(OverflowError, match="exceeds int64"):
        INT64.encode(2**63)
    with pytest.raises(ValueError, match="non-finite"):
        DOUBLE.encode(float("nan"))
    with pytest.raises(TypeError, match="cannot decode wire kind json"):
        STRING.decode(Value(WireKind.JSON, '"a"'))


def test_json_codec_writes_canonical_json_and_checks_the_expected_type() -> None:
    encoded = MONEY.encode(Money(5, "EUR"))
    assert encoded == Value(WireKind.JSON, '{"cents":5,"currency":"EUR"}')
    assert MONEY.decode(encoded) == Money(5, "EUR")
    with pytest.raises(TypeError, match="Money requires Money, got int"):
        MONEY.encode(5)
    with pytest.raises(TypeError, match="Money requires a JSON value"):
        MONEY.decode(Value(WireKind.STRING, "x"))


def test_a_custom_codec_wins_over_the_built_in_one_and_the_mapping_is_copied() -> None:
    mine: dict[object, Any] = {int: MONEY}
    codecs = CodecRegistry(mine)
    mine[str] = MONEY
    assert codecs.resolve(int) is MONEY
    assert codecs.resolve(str) is STRING


class Takes(Step[Any]):
    def execute(self, context: Context, value: Any) -> StepDecision:
        return graceful_complete(value)


def flow_taking(tp: Any) -> Flow[Any]:
    class Step1(Takes):
        pass

    Step1.execute = lambda self, context, value: graceful_complete(value)  # type: ignore[method-assign]
    Step1.execute.__annotations__.update(context=Context, value=tp, **{"return": StepDecision})

    class OneStep(Flow[Any]):
        def get_steps(self) -> StepList[Any]:
            return StepList.start_step(Step1())

    return OneStep()


@pytest.mark.parametrize("tp", [dict, Any, Optional[str], str | None, object, Money])  # noqa: UP045
def test_a_registered_codec_makes_a_type_acceptable_as_a_step_input(tp: Any) -> None:
    with pytest.raises(FlowDefinitionError, match="register one in CodecRegistry"):
        Registry([flow_taking(tp)])
    Registry([flow_taking(tp)], CodecRegistry({tp: JsonCodec("T", lambda d: d)}))


def test_the_registry_keeps_its_codec_registry_and_refuses_anything_else() -> None:
    codecs = CodecRegistry({Money: MONEY})
    assert Registry([], codecs).codec_registry is codecs
    assert isinstance(Registry([]).codec_registry, CodecRegistry)
    with pytest.raises(TypeError, match="takes a CodecRegistry, not dict"):
        Registry([], {Money: MONEY})  # type: ignore[arg-type]


class Price(Step[Money]):
    def execute(self, context: Context, price: Money) -> StepDecision:
        assert isinstance(price, Money)
        return go_to(Double, Money(price.cents * 2, price.currency))


class Double(Step[Money]):
    def execute(self, context: Context, price: Money) -> StepDecision:
        assert isinstance(price, Money)
        return graceful_complete(price)


class Pricing(Flow[Money]):
    def get_steps(self) -> StepList[Money]:
        return StepList.start_step(Price()).other_steps(Double())


def test_values_of_a_custom_type_go_through_its_codec(tmp_path: Path) -> None:
    registry = Registry([Pricing()], CodecRegistry({Money: MONEY}))
    with Client(registry, db=tmp_path / "dex.db", clock=Clock.virtual()) as client:
        client.start_flow(Pricing(), "p1", Money(150, "EUR"))
        result = client.wait_for_flow("p1")
        assert result.status is FlowStatus.COMPLETED, result.error_message
        [first, second] = [s.input for s in client.store.steps_of("p1")]
        assert json.loads(first) == {"cents": 150, "currency": "EUR"}  # the codec's JSON, stored as is
        assert json.loads(second) == {"cents": 300, "currency": "EUR"}
        assert result.completions[0].decode(Money) == Money(300, "EUR")


def test_a_value_the_codec_refuses_fails_the_start_with_a_mapping_error(tmp_path: Path) -> None:
    strict = JsonCodec("Money", lambda d: Money(d["cents"], d["currency"]), lambda m: vars(m), Money)
    with Client(Registry([Pricing()], CodecRegistry({Money: strict})), db=tmp_path / "dex.db",
                clock=Clock.virtual()) as client, pytest.raises(ValueMappingError, match="Money"):
        client.start_flow(Pricing(), "p1", {"cents": "many"})


@dataclass(frozen=True)
class Parcel:
    weight: int


class Weigh(Step[Parcel]):
    def execute(self, context: Context, input: Parcel) -> StepDecision:
        return graceful_complete(input.weight)


class ParcelFlow(Flow[Parcel]):
    def get_steps(self) -> StepList[Parcel]:
        return StepList(Weigh())


def test_a_worker_builds_its_steps_validators_at_start_up_not_in_the_first_attempt(tmp_path: Path) -> None:
    from dexcli import Worker

    codec_module._adapter.cache_clear()
    with Worker(Registry([ParcelFlow()]), db=tmp_path / "w.db"):
        misses = codec_module._adapter.cache_info().misses
        assert misses >= 1
        codec_module.adapter(Parcel)  # what the first attempt of Weigh decodes its input with
        assert codec_module._adapter.cache_info().misses == misses


@dataclass
class _Line:
    item: str
    qty: int
    price: float
    when: datetime | None = None


@pytest.mark.parametrize(("data", "tp"), [
    (True, int), (False, float), (1, bool), ("5", int), (5.0, int), (5, str),
    ([1, True], list[int]), ({"item": "x", "qty": True, "price": 1.0}, _Line),
    ({"a": False}, dict[str, int]),
])
def test_values_are_read_as_strictly_as_json_types_say(data: Any, tp: Any) -> None:
    """As the official SDK's codec: `true` is no int (bool is an int subclass, and pydantic's lax
    mode made it 1), `1` no bool, `"5"` and `5.0` no int."""
    from dexcli.sdk.codec import from_jsonable
    from dexcli.sdk.errors import ValueMappingError

    with pytest.raises(ValueMappingError):
        from_jsonable(data, tp)


def test_strict_reading_keeps_the_json_forms_of_structured_values() -> None:
    from dexcli.sdk.codec import from_jsonable, to_jsonable

    line = from_jsonable({"item": "x", "qty": 2, "price": 3, "when": "2026-01-31T12:00:00Z"}, _Line)
    assert line.qty == 2 and line.price == 3.0 and line.when is not None and line.when.year == 2026
    assert from_jsonable({"1": "a"}, dict[int, str]) == {1: "a"}
    assert from_jsonable(to_jsonable(b"raw"), bytes) == b"raw"
    assert from_jsonable([1, 2], tuple[int, ...]) == (1, 2)
    assert from_jsonable(None, Optional[int]) is None  # noqa: UP045 - the spelling flows use
