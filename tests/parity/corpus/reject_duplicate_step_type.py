"""Rejected: two steps of one flow share a step type."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class Other(Step[int]):
    def get_step_type(self) -> str:
        return "Bad"

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad, self.other = Bad(), Other()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad).other_steps(self.other)
