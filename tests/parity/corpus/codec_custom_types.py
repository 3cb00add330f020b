"""Valid with a CodecRegistry: inputs the built-in codecs refuse (dict, Any, Optional[str],
str | None, object, a plain class) register once a codec is registered for each exact hint."""

from __future__ import annotations

from typing import Any, Optional

from dexcli import CodecRegistry, Context, Flow, JsonCodec, Step, StepDecision, StepList, go_to, graceful_complete


class Money:
    def __init__(self, cents: int) -> None:
        self.cents = cents


CODECS = CodecRegistry({
    dict: JsonCodec("dict", dict),
    Any: JsonCodec("Any", lambda data: data),
    Optional[str]: JsonCodec("Optional[str]", lambda data: data),  # noqa: UP045
    object: JsonCodec("object", lambda data: data),
    Money: JsonCodec("Money", lambda data: Money(data["cents"]), vars, Money),
})


class TakesDict(Step[dict]):  # type: ignore[type-arg]
    def execute(self, context: Context, data: dict) -> StepDecision:  # type: ignore[type-arg]
        return go_to(TakesAny, data)


class TakesAny(Step[Any]):
    def execute(self, context: Context, data: Any) -> StepDecision:
        return go_to(TakesOptional, None)


class TakesOptional(Step[Optional[str]]):  # noqa: UP045
    def execute(self, context: Context, text: Optional[str]) -> StepDecision:  # noqa: UP045
        return go_to(TakesUnion, text)


class TakesUnion(Step[str | None]):
    def execute(self, context: Context, text: str | None) -> StepDecision:
        return go_to(TakesObject, text)


class TakesObject(Step[object]):
    def execute(self, context: Context, thing: object) -> StepDecision:
        return go_to(TakesMoney, Money(5))


class TakesMoney(Step[Money]):
    def execute(self, context: Context, money: Money) -> StepDecision:
        return graceful_complete(money.cents)


class CustomCodecsFlow(Flow[dict]):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.steps = [TakesDict(), TakesAny(), TakesOptional(), TakesUnion(), TakesObject(), TakesMoney()]

    def get_steps(self) -> StepList[dict]:  # type: ignore[type-arg]
        return StepList.start_step(self.steps[0]).other_steps(*self.steps[1:])
