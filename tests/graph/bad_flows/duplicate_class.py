"""Validation: the same step class registered twice (under two step types)."""
from dexcli import Context, Flow, Step, StepDecision, StepList, StepMovement, go_to_many, graceful_complete


class Echo(Step[str]):  # ERROR invalid-definition
    def __init__(self, name: str) -> None:
        self.name = name

    def get_step_type(self) -> str:
        return self.name

    def execute(self, context: Context, text: str) -> StepDecision:
        return graceful_complete(text)


class Begin(Step[None]):
    def __init__(self, a: Echo, b: Echo) -> None:
        self.a, self.b = a, b

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(self.a, "x"), StepMovement.of(self.b, "y"))


class DuplicateClassFlow(Flow[None]):
    def __init__(self) -> None:
        self.a, self.b = Echo("EchoA"), Echo("EchoB")
        self.begin = Begin(self.a, self.b)

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.begin).other_steps(self.a, self.b)
