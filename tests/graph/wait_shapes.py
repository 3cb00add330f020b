"""Steps whose wait_for the graph reads (plain module for tests/graph/test_graph_waits.py)."""
from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Channel,
    ChannelMap,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    Timer,
    Wait,
    graceful_complete,
)

orders = ChannelMap("orders", int)
replies = Channel("replies", str)
HOURS = 24


def make_wait(n: int) -> Wait:
    return Wait.until(replies.for_n(n))


class Done(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class Shapes(Step[str]):
    """Every kind of condition, with constants and without."""

    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.all_of(
            orders.for_n("eu", 2, condition_id="eu"),
            orders.at_least(input, 1),
            replies.for_range(at_least=2),
            replies.at_most(input.count("x")),
            Timer.by_duration(timedelta(hours=HOURS) + timedelta(minutes=30), condition_id=input),
            SubFlow.run(Child, input),
        )

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class Computed(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return make_wait(input)

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Either(Step[bool]):
    def wait_for(self, context: Context, input: bool) -> Wait:
        conds = [replies.for_one()]
        if input:
            return Wait.skip_immediately()
        return Wait.any_of(*conds)

    def execute(self, context: Context, input: bool) -> StepDecision:
        return graceful_complete(input)


class Child(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Done())


class ShapesFlow(Flow[str]):
    def __init__(self) -> None:
        self.shapes, self.computed, self.either = Shapes(), Computed(), Either()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.shapes).other_steps(self.computed, self.either)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(orders, replies)
