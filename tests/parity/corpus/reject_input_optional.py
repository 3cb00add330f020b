"""Rejected: an `Optional[str]` input: the official SDK has no codec for a Union."""

from __future__ import annotations

from typing import Optional

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Bad(Step[Optional[str]]):  # noqa: UP045 - the spelling under test
    def execute(self, context: Context, name: Optional[str]) -> StepDecision:  # noqa: UP045
        return graceful_complete(name or "")


class BadFlow(Flow[Optional[str]]):  # noqa: UP045
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[Optional[str]]:  # noqa: UP045
        return StepList.start_step(self.bad)
