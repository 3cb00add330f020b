"""Flows with attributes: a counter incremented by steps and RPCs, with and without a lock."""

from __future__ import annotations

import asyncio

from dexcli import (
    AsyncContext,
    Attribute,
    AttributeIndex,
    AttributeMap,
    Channel,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Wait,
    go_to_many,
    graceful_complete,
    rpc,
)

counter = Attribute("counter", int)
stop = Channel("stop", str)
status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "OrderStatus"))
notes = AttributeMap("notes", str)


class Increment(Step[int]):
    """Reads the counter, yields the loop for `input` seconds, writes counter + 1."""

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        value = counter.get(context)
        await asyncio.sleep(input)
        counter.set(context, value + 1)
        return graceful_complete(value + 1)


class LockedIncrement(Increment):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(counter.lock(),))


class Hold(Step[int]):
    """Keeps the flow open until something is published to `stop`."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(stop.for_one())

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(counter.get(context))


class Fan(Step[list[int]]):
    """Starts one Increment (or LockedIncrement) per input entry: entries < 0 are locked."""

    def execute(self, context: Context, input: list[int]) -> StepDecision:
        status.set(context, "counting")
        notes.set(context, "fan", f"{len(input)} increments")
        moves = [StepMovement.of(LockedIncrement if d < 0 else Increment, abs(d)) for d in input if d]
        if 0 in input:  # 0: hold the flow open until `stop`
            moves.append(StepMovement.of(Hold, 0))
        return go_to_many(*moves)


class CounterFlow(Flow[list[int]]):
    def __init__(self) -> None:
        self.fan, self.inc, self.locked, self.hold = Fan(), Increment(), LockedIncrement(), Hold()

    def get_steps(self) -> StepList[list[int]]:
        return StepList.start_step(self.fan).other_steps(self.inc, self.locked, self.hold)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(counter, status, notes, stop)

    @rpc(lock_attributes=(counter.lock(),))
    def bump(self, context: Context) -> RPCResult[int]:
        value = counter.get(context) + 1
        counter.set(context, value)
        return RPCResult(value)

    @rpc
    def release(self, context: Context) -> None:
        stop.publish(context, "now")

    @rpc
    def read(self, context: Context) -> RPCResult[int]:
        return RPCResult(counter.get(context))

    @rpc
    def note(self, context: Context, key: str) -> RPCResult[str]:
        return RPCResult(notes.get(context, key))

    @rpc
    def finish(self, context: Context) -> RPCResult[str]:
        status.set(context, "done")
        return RPCResult(status.get(context))  # reads its own staged write


class FailsOnce(Step[int]):
    """Sets the counter to 99 and fails on its first attempt; the second sees the old value."""

    def get_step_options(self) -> StepOptions:
        from dexcli import RetryPolicy

        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=3))

    def execute(self, context: Context, input: int) -> StepDecision:
        seen = counter.get(context)
        counter.set(context, 99)
        if context.attempt == 1:
            raise RuntimeError("first attempt fails after staging a write")
        counter.set(context, seen + input)
        return graceful_complete(seen)


class RetryFlow(Flow[int]):
    def __init__(self) -> None:
        self.step = FailsOnce()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(counter)
