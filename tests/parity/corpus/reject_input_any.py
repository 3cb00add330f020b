"""Rejected: an `Any` input: the official SDK has no codec for it."""

from __future__ import annotations

from typing import Any

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[Any]):
    def execute(self, context: Context, data: Any) -> StepDecision:
        return graceful_complete(str(data))


class BadFlow(Flow[Any]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[Any]:
        return StepList.start_step(self.bad)
