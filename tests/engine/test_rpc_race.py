"""An RPC racing a running step: both publish to the channel a third step waits on; every
publish lands exactly once (no lost or doubled message), whichever commits first."""

from __future__ import annotations

import asyncio

from dexcli import (
    AsyncClient,
    AsyncContext,
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Wait,
    go_to_many,
    graceful_complete,
    rpc,
)
from dexcli.engine.clock import run as run_on_clock
from dexcli.testing import DexTestEnv

notes = Channel("notes", str)


class Busy(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(input)
        notes.publish(context, f"step after {input} s")
        return graceful_complete(None)


class Gather(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(notes.for_n(input))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(sorted(notes.results(context)))


class Fork(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Busy, 2), StepMovement.of(Busy, 4), StepMovement.of(Gather, input))


class RaceFlow(Flow[int]):
    def __init__(self) -> None:
        self.fork, self.busy, self.gather = Fork(), Busy(), Gather()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.fork).other_steps(self.busy, self.gather)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(notes)

    @rpc
    def note(self, context: Context, text: str) -> RPCResult[int]:
        notes.publish(context, text)
        return RPCResult(notes.size(context) + 1)


def test_rpc_publishes_and_step_publishes_interleave_without_loss() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = RaceFlow()
        env.start(flow, 5, "r")  # Gather needs 5: two from the steps, three from RPCs
        client = AsyncClient(engine=env.engine)

        async def scenario() -> None:
            drive = asyncio.create_task(env.engine.drive_async(
                ["r"], until=lambda: (row := env.engine.store.get_flow("r")) is None or not row.is_running,
                release=False))
            for i, at in enumerate((1.0, 3.0, 4.0)):  # before, between and at the steps' publishes
                await asyncio.sleep(at - env.clock.now())
                await client.invoke_rpc(flow.note, "r", f"rpc {i}")
            await drive

        run_on_clock(scenario, env.clock)
        outputs = [c.output for c in env.result("r").completions if c.step_type == "Gather"]
        assert outputs == [["rpc 0", "rpc 1", "rpc 2", "step after 2 s", "step after 4 s"]]
        assert env.store.read(lambda tx: tx.pending_messages("r")) == []
