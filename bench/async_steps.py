"""The bench's ThreeStepFlow with execute_durability=ASYNC on each of its three steps."""

from dexcli import Context, StepDecision, StepDurability, StepOptions, go_to
from dexcli_flows import three_steps as ts

ASYNC = StepOptions(execute_durability=StepDurability.ASYNC)


class First(ts.First):
    def get_step_options(self) -> StepOptions:
        return ASYNC

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Second, input + 1)


class Second(ts.Second):
    def get_step_options(self) -> StepOptions:
        return ASYNC

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Third, input * 2)


class Third(ts.Third):
    def get_step_options(self) -> StepOptions:
        return ASYNC


class ThreeAsyncSteps(ts.ThreeStepFlow):
    def __init__(self) -> None:
        self.first, self.second, self.third = First(), Second(), Third()
