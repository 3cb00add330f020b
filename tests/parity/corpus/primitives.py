"""Valid: every built-in codec of the official SDK as a step input (str, bool, int, float,
bytes, None, datetime) and decisions that end the flow in each way."""

from __future__ import annotations

from datetime import datetime

from dexcli import (
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    dead_end,
    force_complete,
    force_fail,
    go_to,
    graceful_complete,
)


class Begin(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Text, "hello")


class Text(Step[str]):
    def execute(self, context: Context, text: str) -> StepDecision:
        return go_to(Flag, bool(text))


class Flag(Step[bool]):
    def execute(self, context: Context, flag: bool) -> StepDecision:
        return go_to(Number, 1 if flag else 0)


class Number(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(Ratio, n / 2)


class Ratio(Step[float]):
    def execute(self, context: Context, ratio: float) -> StepDecision:
        return go_to(Blob, b"x" * int(ratio * 10))


class Blob(Step[bytes]):
    def execute(self, context: Context, blob: bytes) -> StepDecision:
        return go_to(When, datetime(2026, 1, 1))


class When(Step[datetime]):
    def execute(self, context: Context, when: datetime) -> StepDecision:
        if when.year < 2000:
            return force_fail("too early")
        if when.year > 3000:
            return dead_end()
        if when.month == 1:
            return force_complete(when.isoformat())
        return graceful_complete()


class PrimitivesFlow(Flow[None]):
    def __init__(self) -> None:
        self.steps = [Begin(), Text(), Flag(), Number(), Ratio(), Blob(), When()]

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.steps[0]).other_steps(*self.steps[1:])
