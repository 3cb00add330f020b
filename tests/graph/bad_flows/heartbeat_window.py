"""Rule heartbeat-window: interval + call timeout > heartbeat_timeout - 10 s."""
import asyncio
from datetime import timedelta

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, graceful_complete

POLL_INTERVAL = timedelta(seconds=45)
CALL_TIMEOUT = timedelta(seconds=10)


async def fetch_status(job_id: str) -> str:
    return "RUNNING"


class AwaitJob(Step[str]):
    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        while True:
            status = await asyncio.wait_for(fetch_status(job_id), CALL_TIMEOUT.total_seconds())
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await context.heartbeat(status)
            await asyncio.sleep(POLL_INTERVAL.total_seconds())  # FINDING heartbeat-window


class HeartbeatWindowFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)
