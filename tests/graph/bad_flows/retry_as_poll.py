"""Rule retry-as-poll: "not ready" raised as an error so that retries do the polling."""
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete, retry_after

STATUS: dict[str, str] = {}


class AwaitJob(Step[str]):
    def execute(self, context: Context, job_id: str) -> StepDecision:
        status = STATUS.get(job_id, "RUNNING")
        if status == "RUNNING":
            raise retry_after(5, RuntimeError("job still running"))  # FINDING retry-as-poll
        return graceful_complete(status)


class RetryAsPollFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
