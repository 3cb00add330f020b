"""Every rule can be silenced on its line: this flow has one finding, silenced."""
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
            status = await self.client.get_status(job_id)  # dex: ignore[call-without-timeout]
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await context.heartbeat(status)
            await asyncio.sleep(2)


class SilencedFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
