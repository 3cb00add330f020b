"""Rejected: execute annotated with another return type than StepDecision."""

from __future__ import annotations

from typing import Any

from dexcli import Context, Flow, Step, StepList, graceful_complete


class Bad(Step[int]):
    def execute(self, context: Context, n: int) -> Any:
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
