"""Rule sync-context-heartbeat: a sync step calls context.heartbeat, which only an async context has."""
from collections.abc import Generator

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    go_to,
    graceful_complete,
    heartbeat,
)


class Count(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        for i in range(n):
            context.heartbeat(i)  # FINDING sync-context-heartbeat
        return go_to(Frames, n)


class Frames(Step[int]):
    def execute(self, ctx: Context, n: int) -> Generator[StepOutput, None, StepDecision]:
        yield heartbeat(n)
        self.report(ctx, n)
        return go_to(Awaits, n)

    def report(self, ctx: Context, n: int) -> None:
        ctx.heartbeat(n)  # FINDING sync-context-heartbeat


class Awaits(Step[int]):
    async def execute(self, context: AsyncContext, n: int) -> StepDecision:
        await context.heartbeat(n)  # an async context has it
        return graceful_complete(n)


class SyncContextHeartbeatFlow(Flow[int]):
    def __init__(self) -> None:
        self.count, self.frames, self.awaits = Count(), Frames(), Awaits()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.count).other_steps(self.frames, self.awaits)
