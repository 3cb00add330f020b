"""Rule call-without-timeout: an awaited external call in the polling loop with no timeout."""
import asyncio

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, graceful_complete


class JobClient:
    async def get_status(self, job_id: str) -> str:
        return "RUNNING"


class AwaitJob(Step[str]):
    def __init__(self) -> None:
        self.client = JobClient()

    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        while True:
            status = await self.client.get_status(job_id)  # FINDING call-without-timeout
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await context.heartbeat(status)
            await asyncio.sleep(2)


class CallWithoutTimeoutFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
