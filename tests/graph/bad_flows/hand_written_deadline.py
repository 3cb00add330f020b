"""Rule hand-written-deadline: the step computes the deadline its options already enforce."""
import asyncio
import time
from datetime import timedelta

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, StepOptions, force_fail, graceful_complete


async def fetch_status(job_id: str) -> str:
    return "RUNNING"


class AwaitJob(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_method_timeout=timedelta(minutes=10))

    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        deadline = time.time() + 600  # FINDING hand-written-deadline
        while time.time() < deadline:
            status = await asyncio.wait_for(fetch_status(job_id), 10)
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await context.heartbeat(status)
            await asyncio.sleep(2)
        return force_fail(f"job {job_id} took too long")


class HandWrittenDeadlineFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
