"""Rejected: execute without `-> StepDecision`."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: Context, n: int):  # no -> StepDecision
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
