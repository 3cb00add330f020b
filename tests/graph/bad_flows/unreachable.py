"""Validation (warning): a registered step nothing leads to."""
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Work(Step[str]):
    def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class Orphan(Step[str]):  # WARNING unreachable-step
    def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class UnreachableFlow(Flow[str]):
    def __init__(self) -> None:
        self.work, self.orphan = Work(), Orphan()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.work).other_steps(self.orphan)
