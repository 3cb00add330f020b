"""Rule lock-held-while-polling: execute_lock_attributes held for the whole wait."""
import asyncio

from dexcli import (
    AsyncContext,
    Attribute,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    graceful_complete,
)

OWNER = Attribute("Owner", str)


async def fetch_status(job_id: str) -> str:
    return "RUNNING"


class AwaitJob(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_lock_attributes=(OWNER.lock(),),  # FINDING lock-held-while-polling
        )

    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        while True:
            status = await asyncio.wait_for(fetch_status(job_id), 10)
            if status == "SUCCEEDED":
                return graceful_complete(status)
            await context.heartbeat(status)
            await asyncio.sleep(2)


class LockHeldFlow(Flow[str]):
    def __init__(self) -> None:
        self.await_job = AwaitJob()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.await_job)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(OWNER)
