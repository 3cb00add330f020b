"""Rejected: a plain class input (not a dataclass, not an Enum): no codec for it."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x, y


class Bad(Step[Point]):
    def execute(self, context: Context, p: Point) -> StepDecision:
        return graceful_complete(p.x + p.y)


class BadFlow(Flow[Point]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[Point]:
        return StepList.start_step(self.bad)
