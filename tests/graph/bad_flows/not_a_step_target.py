"""Validation: a self.<attr> go_to target that is not a step at all."""
from dexcli import Context, Flow, Step, StepDecision, StepList, go_to


class Begin(Step[None]):
    def __init__(self) -> None:
        self.jobs = {"a": 1}

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(self.jobs, "x")  # ERROR unknown-target


class NotAStepTargetFlow(Flow[None]):
    def __init__(self) -> None:
        self.begin = Begin()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.begin)
