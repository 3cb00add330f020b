"""Validation: two step classes with the same step type."""
from dexcli import Context, Flow, Step, StepDecision, StepList, StepMovement, go_to_many, graceful_complete


class Left(Step[str]):
    def get_step_type(self) -> str:
        return "Side"

    def execute(self, context: Context, text: str) -> StepDecision:
        return graceful_complete(text)


class Right(Step[str]):  # ERROR invalid-definition
    def get_step_type(self) -> str:
        return "Side"

    def execute(self, context: Context, text: str) -> StepDecision:
        return graceful_complete(text)


class Begin(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Left, "x"), StepMovement.of(Right, "y"))


class DuplicateTypeFlow(Flow[None]):
    def __init__(self) -> None:
        self.begin, self.left, self.right = Begin(), Left(), Right()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.begin).other_steps(self.left, self.right)
