"""Rejected: a CodecRegistry with a codec for dict but none for `object`: the custom codecs add
to the built-ins, they do not make every type acceptable."""

from __future__ import annotations

from dexcli import CodecRegistry, Context, Flow, JsonCodec, Step, StepDecision, StepList, go_to, graceful_complete

CODECS = CodecRegistry({dict: JsonCodec("dict", dict)})


class TakesDict(Step[dict]):  # type: ignore[type-arg]
    def execute(self, context: Context, data: dict) -> StepDecision:  # type: ignore[type-arg]
        return go_to(TakesObject, data)


class TakesObject(Step[object]):
    def execute(self, context: Context, thing: object) -> StepDecision:
        return graceful_complete()


class MissingOneFlow(Flow[dict]):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self.steps = [TakesDict(), TakesObject()]

    def get_steps(self) -> StepList[dict]:  # type: ignore[type-arg]
        return StepList.start_step(self.steps[0]).other_steps(*self.steps[1:])
