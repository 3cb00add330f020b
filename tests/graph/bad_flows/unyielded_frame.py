"""Rule unyielded-frame: a heartbeat(...) / stream.write(...) frame built and thrown away."""
from collections.abc import Generator

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    Stream,
    go_to,
    graceful_complete,
    heartbeat,
)

PROGRESS = Stream("Progress", int, 1 << 20)


class Copy(Step[int]):
    def execute(self, context: Context, n: int) -> Generator[StepOutput, None, StepDecision]:
        for i in range(n):
            heartbeat(i)  # FINDING unyielded-frame
            PROGRESS.write(context, i)  # FINDING unyielded-frame
            yield heartbeat(i)
            yield PROGRESS.write(context, i)
            frame = heartbeat(i)
            yield frame
        return go_to(Finish, n)


class Finish(Step[int]):
    async def execute(self, context: AsyncContext, n: int) -> StepDecision:
        PROGRESS.write(context, n)  # an async step's write is a plain call: it writes
        heartbeat(n)  # FINDING unyielded-frame
        return graceful_complete(n)


class UnyieldedFrameFlow(Flow[int]):
    def __init__(self) -> None:
        self.copy, self.finish = Copy(), Finish()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.copy).other_steps(self.finish)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(PROGRESS)
