"""Rejected: a `str | None` input: the official SDK has no codec for a union."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[str | None]):
    def execute(self, context: Context, name: str | None) -> StepDecision:
        return graceful_complete(name or "")


class BadFlow(Flow[str | None]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[str | None]:
        return StepList.start_step(self.bad)
