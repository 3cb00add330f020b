"""Rejected: an execute whose context is not annotated."""

from __future__ import annotations

from dexcli import Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context, n: int) -> StepDecision:  # type: ignore[no-untyped-def]
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
