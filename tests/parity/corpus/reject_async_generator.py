"""Rejected: an async generator execute (never accepted)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from dexcli import AsyncContext, Flow, Step, StepList, StepOutput, heartbeat


class Bad(Step[int]):
    async def execute(self, context: AsyncContext, n: int) -> AsyncGenerator[StepOutput, None]:
        yield heartbeat(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
