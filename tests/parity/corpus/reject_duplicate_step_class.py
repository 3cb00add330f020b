"""Rejected: two instances of one step class under different step types (go_to names classes)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def __init__(self, name: str) -> None:
        self.name = name

    def get_step_type(self) -> str:
        return self.name

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.a, self.b = Bad("A"), Bad("B")

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.a).other_steps(self.b)
