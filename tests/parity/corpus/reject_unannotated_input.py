"""Rejected: an execute whose input is not annotated."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: Context, n) -> StepDecision:  # type: ignore[no-untyped-def]
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
