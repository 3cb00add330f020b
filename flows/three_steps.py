"""ThreeStepFlow: three short sync steps in a row, each a checkpointed transition.

The smallest flow for crash and throughput experiments: First -> Second -> Third -> done.
"""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class First(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Second, input + 1)


class Second(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Third, input * 2)


class Third(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input + 3)


class ThreeStepFlow(Flow[int]):
    """Three short steps: First(n) -> Second(n+1) -> Third(2(n+1)) -> 2(n+1)+3."""

    def __init__(self) -> None:
        self.first, self.second, self.third = First(), Second(), Third()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.first).other_steps(self.second, self.third)
