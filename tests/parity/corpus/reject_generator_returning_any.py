"""Rejected: a generator execute annotated Generator[StepOutput, None, Any]."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from dexcli import Context, Flow, Step, StepList, StepOutput, graceful_complete, heartbeat


class Bad(Step[int]):
    def execute(self, context: Context, n: int) -> Generator[StepOutput, None, Any]:
        yield heartbeat(n)
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
