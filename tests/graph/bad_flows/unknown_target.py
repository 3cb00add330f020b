"""Validation: a go_to target that is not registered."""
from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class Forgotten(Step[str]):
    def execute(self, context: Context, text: str) -> StepDecision:
        return graceful_complete(text)


class Begin(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Forgotten, "x")  # ERROR unknown-target


class UnknownTargetFlow(Flow[None]):
    def __init__(self) -> None:
        self.begin = Begin()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.begin)
