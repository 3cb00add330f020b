"""A goTo target computed at run time: the graph says so on the edge instead of guessing."""
from typing import Any

from dexcli import Context, Flow, Step, StepDecision, StepList, dead_end, force_complete, go_to


class Small(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return force_complete(n)


class Large(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return dead_end()


class Route(Step[int]):
    def pick(self, n: int) -> Any:
        return Small if n < 10 else Large

    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(self.pick(n), n)


class RuntimeTargetFlow(Flow[int]):
    def __init__(self) -> None:
        self.route, self.small, self.large = Route(), Small(), Large()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.route).other_steps(self.small, self.large)
