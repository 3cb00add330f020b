"""Rejected: a generator execute annotated Iterator[StepOutput] instead of
Generator[StepOutput, None, StepDecision]."""

from __future__ import annotations

from collections.abc import Iterator

from dexcli import Context, Flow, Step, StepList, StepOutput, graceful_complete, heartbeat


class Bad(Step[int]):
    def execute(self, context: Context, n: int) -> Iterator[StepOutput]:
        yield heartbeat(n)
        return graceful_complete(n)  # type: ignore[misc]


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
