"""Validation: the recovery step's input type differs from the failing step's (registers, as with
the official Registry, with a warning: the route fails when taken)."""
from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, force_fail, graceful_complete


class Recover(Step[int]):
    def execute(self, context: Context, attempts: int) -> StepDecision:
        return force_fail(f"gave up after {attempts}")


class Work(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class RecoveryMismatchFlow(Flow[str]):  # WARNING definition-warning
    def __init__(self) -> None:
        self.work, self.recover = Work(), Recover()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.work).other_steps(self.recover)
