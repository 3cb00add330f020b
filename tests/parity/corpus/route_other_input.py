"""An execute-failure route to a step of another input type: both Registries take it (the recovery
step is given the failed step's input and fails when it does not decode; dex warns)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, force_fail, graceful_complete


class Recover(Step[str]):
    def execute(self, context: Context, text: str) -> StepDecision:
        return force_fail(text)


class Work(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class MismatchFlow(Flow[int]):
    def __init__(self) -> None:
        self.work, self.recover = Work(), Recover()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.work).other_steps(self.recover)
