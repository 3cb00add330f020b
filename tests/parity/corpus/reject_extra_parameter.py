"""Rejected: an execute taking a third parameter."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: Context, n: int, extra: int) -> StepDecision:
        return graceful_complete(n + extra)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
