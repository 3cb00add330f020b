"""Valid under Registry(..., allow_async_handlers=True) (as an AsyncWorker's registry):
an async step annotated with AsyncContext next to a sync one."""

from __future__ import annotations

from dexcli import AsyncContext, Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class Fetch(Step[str]):
    async def execute(self, context: AsyncContext, url: str) -> StepDecision:
        await context.heartbeat(url)
        return go_to(Store, len(url))


class Store(Step[int]):
    def execute(self, context: Context, size: int) -> StepDecision:
        return graceful_complete(size)


class FetchFlow(Flow[str]):
    def __init__(self) -> None:
        self.fetch, self.store = Fetch(), Store()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.fetch).other_steps(self.store)
