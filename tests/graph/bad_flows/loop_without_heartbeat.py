"""Rule loop-without-heartbeat: a long loop with no heartbeat and no Stream write."""
import asyncio

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, graceful_complete


async def fetch_status(job_id: str) -> str:
    return "RUNNING"


class AwaitJob(Step[str]):
    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        while True:  # FINDING loop-without-heartbeat
            status = await asyncio.wait_for(fetch_status(job_id), 10)
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await asyncio.sleep(2)


class LoopWithoutHeartbeatFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
