"""with_canceling_steps / with_canceling_sibling_steps: the cancelled executions end CANCELED
with their attempt fenced, and no output of theirs is collected."""

from __future__ import annotations

import asyncio

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    go_to_many,
    graceful_complete,
)
from dexcli.testing import DexTestEnv


class Slow(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(30)
        return graceful_complete({"carrier": "slow", "price": input})


class Fast(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(1)
        decision = graceful_complete({"carrier": "fast", "price": input})
        return decision.with_canceling_sibling_steps(Slow) if input % 2 else decision.with_canceling_steps(Slow)


class Quote(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Fast, input), StepMovement.of(Slow, input))


class QuoteFlow(Flow[int]):
    def __init__(self) -> None:
        self.quote, self.fast, self.slow = Quote(), Fast(), Slow()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.quote).other_steps(self.fast, self.slow)


def _check(env: DexTestEnv, flow_id: str, price: int) -> None:
    result = env.run(QuoteFlow(), price, flow_id)
    assert [c.output for c in result.completions] == [{"carrier": "fast", "price": price}]
    steps = {s["stepExecutionId"]: s for s in env.inspect(flow_id)["steps"]}
    assert steps["Slow-1"]["status"] == "CANCELED"
    assert [a["outcome"] for a in steps["Slow-1"]["attempts"]] == ["CANCELED"]
    assert env.clock.now() < 30  # the flow did not wait for the cancelled sibling


def test_canceling_the_sibling_collects_only_the_first_output() -> None:
    with DexTestEnv(start=0.0) as env:
        _check(env, "siblings", 3)


def test_canceling_a_step_type_flow_wide() -> None:
    with DexTestEnv(start=0.0) as env:
        _check(env, "flow-wide", 4)
