"""Rejected: an `object` input: the official SDK has no codec for it."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[object]):
    def execute(self, context: Context, data: object) -> StepDecision:
        return graceful_complete(str(data))


class BadFlow(Flow[object]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[object]:
        return StepList.start_step(self.bad)
