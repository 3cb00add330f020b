"""Flows whose steps retry, hold locks or wait inside one method call (tests/engine/test_method_calls.py).

The counter starts at 5 (Prepare writes it); RPCs write the counter and a note while a step is
in its call, so a test can tell the call's snapshot from what was written since."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from dexcli import (
    AsyncContext,
    Attribute,
    AttributeMap,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)

counter = Attribute("counter", int)
notes = AttributeMap("notes", str)

BACKOFF = timedelta(seconds=10)


def _seen(context: Any) -> dict[str, Any]:
    return {"attempt": context.attempt, "counter": counter.get(context), "note": notes.get(context, "a")}


class Prepare(Step[list[str]]):
    """Writes counter = 5, then starts the steps its input names (all at once)."""

    def __init__(self, steps: dict[str, type[Step[Any]]]) -> None:
        self.steps = steps

    def execute(self, context: Context, input: list[str]) -> StepDecision:
        counter.set(context, 5)
        return go_to_many(*(StepMovement.of(self.steps[name], 0) for name in input))


class ReadsThenFails(Step[int]):
    """Reads the counter and a note, runs 2 s, and fails on its first attempt; each attempt's
    reading is kept in `seen`, the last returned. Then the flow reads them again in ReadsAgain."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(initial_interval=BACKOFF, maximum_attempts=3),
                           execute_load_attribute_maps=(notes,))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        seen = _seen(context)
        self.seen.append(seen)
        await asyncio.sleep(2)
        if context.attempt == 1:
            raise RuntimeError("the first attempt fails")
        return go_to(ReadsAgain, 0)


class ReadsAgain(Step[int]):
    """A new method call: it reads what the RPCs wrote."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_load_attribute_maps=(notes,))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(_seen(context))


class LockedFailsOnce(Step[int]):
    """Holds the counter's lock; its first attempt fails at once, the second adds 1 after 2 s."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(counter.lock(),),
                           execute_retry=RetryPolicy(initial_interval=BACKOFF, maximum_attempts=3))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        if context.attempt == 1:
            raise RuntimeError("the first attempt fails")
        value = counter.get(context)
        await asyncio.sleep(2)
        counter.set(context, value + 1)
        return graceful_complete(value + 1)


class LockedWriter(Step[int]):
    """Another step that takes the counter's lock: it sets it to 100."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(counter.lock(),))

    def execute(self, context: Context, input: int) -> StepDecision:
        counter.set(context, 100)
        return graceful_complete(100)


class HoldsLock50s(Step[int]):
    """Holds the counter's lock for 50 s (heartbeating), then completes."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(counter.lock(),))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        for _ in range(5):
            await asyncio.sleep(10)
            await context.heartbeat()
        return graceful_complete("held")


class ShortBudget(Step[int]):
    """Takes the counter's lock with a 20 s TotalDuration: its first attempt fails, the retry
    (5 s later) completes after 1 s. It fits only if the budget starts once it has the lock."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(counter.lock(),),
                           execute_retry=RetryPolicy(initial_interval=timedelta(seconds=5), maximum_attempts=3,
                                                     total_duration=timedelta(seconds=20)))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(1)
        if context.attempt == 1:
            raise RuntimeError("the first attempt fails")
        return graceful_complete("in budget")


class MethodCallFlow(Flow[list[str]]):
    """Prepare, then the steps the input names: "reads", "locked", "writer", "holds", "short"."""

    def __init__(self) -> None:
        self.reads, self.again = ReadsThenFails(), ReadsAgain()
        self.locked, self.writer = LockedFailsOnce(), LockedWriter()
        self.holds, self.short = HoldsLock50s(), ShortBudget()
        by_name: dict[str, Step[Any]] = {"reads": self.reads, "locked": self.locked, "writer": self.writer,
                                         "holds": self.holds, "short": self.short}
        self.prepare = Prepare({name: type(step) for name, step in by_name.items()})
        self.others: tuple[Step[Any], ...] = (self.again, *by_name.values())

    def get_steps(self) -> StepList[list[str]]:
        return StepList.start_step(self.prepare).other_steps(*self.others)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(counter, notes)

    @rpc
    def write(self, context: Context) -> RPCResult[int]:
        """Adds 1 to the counter and notes "a" = "x" (no lock)."""
        value = counter.get(context) + 1
        counter.set(context, value)
        notes.set(context, "a", "x")
        return RPCResult(value)

    @rpc(lock_attributes=(counter.lock(),))
    def bump(self, context: Context) -> RPCResult[int]:
        value = counter.get(context) + 1
        counter.set(context, value)
        return RPCResult(value)


class SlowWaitFor(Step[int]):
    """A wait_for that takes 90 s (the default heartbeat timeout is 60 s): silent with input 0,
    heartbeating every 30 s otherwise. wait_for gets one attempt."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(wait_for_retry=RetryPolicy(maximum_attempts=1))

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:
        for _ in range(3):
            await asyncio.sleep(30)
            if input:
                await context.heartbeat()
        return Wait.until(Timer.by_duration(timedelta(seconds=1)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete("waited")


class SlowWaitForFlow(Flow[int]):
    def __init__(self) -> None:
        self.step = SlowWaitFor()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)
