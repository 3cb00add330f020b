"""Registers under both SDKs: `go_to(self.<step instance>, x)` is only seen when the decision is
dispatched (the official worker cannot map an instance to a registered step class)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class Second(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class First(Step[int]):
    def __init__(self, second: Second) -> None:
        self.second = second

    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(self.second, n + 1)  # type: ignore[arg-type]


class InstanceTargetFlow(Flow[int]):
    def __init__(self) -> None:
        self.second = Second()
        self.first = First(self.second)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.first).other_steps(self.second)
