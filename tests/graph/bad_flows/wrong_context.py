"""Validation: an async execute whose context is annotated Context, not AsyncContext."""
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Work(Step[str]):  # ERROR invalid-definition
    async def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class WrongContextFlow(Flow[str]):
    def __init__(self) -> None:
        self.work = Work()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.work)
