"""Rejected: an async execute whose context is annotated Context (under allow_async_handlers=True)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[int]):
    async def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
