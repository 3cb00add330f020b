"""Rejected: a bare `dict` input: the official SDK has no codec for it (dict[str, int] has one)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[dict]):  # type: ignore[type-arg]
    def execute(self, context: Context, data: dict) -> StepDecision:  # type: ignore[type-arg]
        return graceful_complete(len(data))


class BadFlow(Flow[dict]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[dict]:
        return StepList.start_step(self.bad)
