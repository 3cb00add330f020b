"""An attempt whose task is cancelled before its first step — its flow closed in the same
group commit that leased it, or the loop stopped right after — is still forgotten (or, on a
stop, released): nothing stale keeps a drive from being idle."""

from __future__ import annotations

import asyncio

from dexcli import (
    AsyncContext,
    Flow,
    Step,
    StepDecision,
    StepList,
    force_complete,
    go_to,
    go_to_many,
    graceful_complete,
)
from dexcli.engine.clock import run as run_on_clock
from dexcli.sdk.decisions import StepMovement
from dexcli.testing import DexTestEnv


class Later(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(1)
        return graceful_complete(input)


class Ends(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return force_complete(input)


class Continues(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return go_to(Later, input)


class Fork(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return go_to_many(StepMovement(Continues, input), StepMovement(Ends, input))


class Race(Flow[int]):
    """Continues and Ends finish in the same loop pass: one commit leases Later and starts its
    task, the next (same flush) force-completes the flow and cancels that task unstarted."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Fork()).other_steps(Continues(), Ends(), Later())


def test_an_attempt_cancelled_before_its_first_step_does_not_keep_the_drive_busy() -> None:
    with DexTestEnv() as env:
        env.start(Race(), 1, "f")
        t0 = env.clock.now()
        run_on_clock(lambda: env.engine.drive_async(["f"], until_idle=True, until=lambda: env.clock.now() > t0 + 30,
                                            poll=1, release=False), env.clock)
        assert env.clock.now() - t0 < 30  # idle at once, not stopped by the guard
        assert env.engine.activity().running == () and env.engine.release() == 0
        view = env.inspect("f")
        assert view["summary"]["flowStatus"] == "COMPLETED"
        assert {s["stepExecutionId"]: s["status"] for s in view["steps"]}["Later-1"] == "CANCELED"
