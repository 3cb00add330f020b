"""Valid: no start step (registers, as with the official Registry; RPCs start its steps)."""
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Only(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("done")


class NoStartFlow(Flow[None]):
    def __init__(self) -> None:
        self.only = Only()

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(self.only)
