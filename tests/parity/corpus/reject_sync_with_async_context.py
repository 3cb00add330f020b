"""Rejected: a sync execute whose context is annotated AsyncContext."""

from __future__ import annotations

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: AsyncContext, n: int) -> StepDecision:
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
