"""Rule retry-as-poll, the other shape: a custom "not ready" exception."""
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete

STATUS: dict[str, str] = {}


class JobNotReady(Exception):
    pass


class AwaitJob(Step[str]):
    def execute(self, context: Context, job_id: str) -> StepDecision:
        status = STATUS.get(job_id)
        if status != "SUCCEEDED":
            raise JobNotReady(f"job {job_id} is not ready yet")  # FINDING retry-as-poll
        return graceful_complete(status)


class NotReadyErrorFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
