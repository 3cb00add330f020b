"""Client calls never strand work: a drive that ends releases what it leased at once, and a
client call made while the engine runs (from a step's handler, sync or async, or from another
thread) waits for the running loop instead of starting a second one. All in virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from dexcli import (
    AsyncClient,
    AsyncContext,
    Client,
    Context,
    Flow,
    FlowAlreadyStartedError,
    LongPollTimeoutError,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    WaitForStepCompletionOptions,
    go_to,
    go_to_many,
    graceful_complete,
)
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

TEN_MINUTES = StartFlowOptions(timeout=timedelta(minutes=10))


def attempts(env: DexTestEnv, flow_id: str) -> dict[str, list[tuple[int, str]]]:
    return {s["stepExecutionId"]: [(a["attempt"], a["outcome"]) for a in s["attempts"]]
            for s in env.inspect(flow_id)["steps"]}


# --------------------------------------------------------------- the program ---------
calls: list[int] = []


class Second(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        calls.append(n)
        return graceful_complete(n + 1)


class First(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(Second, n)


class TwoSteps(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(First()).other_steps(Second())


def test_waiting_for_a_step_leaves_its_successor_to_the_next_drive_which_runs_it_once() -> None:
    calls.clear()
    with DexTestEnv() as env:
        env.client.start_flow(TwoSteps(), "f1", 1, TEN_MINUTES)
        t0 = env.clock.now()
        env.client.wait_for_step_completion("f1", StepExecutionId("First"),
                                            WaitForStepCompletionOptions(request_timeout=timedelta(minutes=5)))
        # Second-1 was leased in First's commit; the drive ended, so its lease was given back
        step = env.store.read(lambda tx: tx.get_step("f1", "Second-1"))
        assert step is not None and step.status.name == "QUEUED"
        result = env.client.wait_for_flow("f1", timedelta(minutes=20))
        assert result.status.name == "COMPLETED"
        assert result.single_output(int) == 2
        assert calls == [1]
        assert attempts(env, "f1")["Second-1"] == [(1, "COMPLETED")]
        assert env.clock.now() - t0 < 1  # nothing waited for a heartbeat timeout


# --------------------------------------------------------------- a drive leaves a running attempt
class Quick(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class Slow(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(minutes=5))

    async def execute(self, context: AsyncContext, n: int) -> StepDecision:  # type: ignore[override]
        await asyncio.sleep(30)
        return graceful_complete(n * 10)


class Fork(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to_many(StepMovement.of(Quick, n), StepMovement.of(Slow, n))


class Forked(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Fork()).other_steps(Quick(), Slow())


def test_an_attempt_still_running_when_a_drive_ends_is_released_not_left_to_its_heartbeat_timeout() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Forked(), "f2", 3, TEN_MINUTES)
        env.client.wait_for_step_completion("f2", StepExecutionId("Quick"),
                                            WaitForStepCompletionOptions(request_timeout=timedelta(minutes=5)))
        slow = env.store.read(lambda tx: tx.get_step("f2", "Slow-1"))
        assert slow is not None and slow.status.name != "RUNNING"  # released at once
        t0 = env.clock.now()
        result = env.client.wait_for_flow("f2", timedelta(minutes=20))
        assert result.status.name == "COMPLETED"
        assert attempts(env, "f2")["Slow-1"] == [(1, "INTERRUPTED"), (2, "COMPLETED")]
        assert env.clock.now() - t0 < 60  # 30 s of its sleep, not the 5-minute heartbeat timeout


# --------------------------------------------------------------- parent and child --------------
class ChildWait(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=3)))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(f"child {input} done")


class Child(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(ChildWait())


class StartAndWait(Step[int]):
    """The docs' parent-child pattern: start a child with the Client, then wait for it."""

    def __init__(self, client: Callable[[], Client], log: list[str]) -> None:
        self.client = client
        self.log = log

    def execute(self, context: Context, n: int) -> StepDecision:
        child_id = f"{context.flow_id}-child-{n}"
        with contextlib.suppress(FlowAlreadyStartedError):
            self.client().start_flow(Child(), child_id, str(n), TEN_MINUTES)
        try:
            result = self.client().wait_for_flow(child_id, timedelta(seconds=2))
        except LongPollTimeoutError:
            self.log.append("not yet")
            return go_to(StartAndWait, n)  # look again (the example's loop)
        self.log.append(result.single_output(str))
        return graceful_complete(result.single_output(str))


class Parent(Flow[int]):
    def __init__(self, client: Callable[[], Client], log: list[str]) -> None:
        self.step = StartAndWait(client, log)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def test_a_sync_parent_step_starts_a_child_with_the_client_and_waits_for_it() -> None:
    with DexTestEnv() as env:
        log: list[str] = []
        parent = Parent(lambda: env.client, log)
        env.client.start_flow(parent, "p", 7, TEN_MINUTES)
        t0 = env.clock.now()
        result = env.client.wait_for_flow("p", timedelta(minutes=5))
        assert result.status.name == "COMPLETED", result
        assert result.single_output(str) == "child 7 done"
        assert log == ["not yet", "child 7 done"]  # a 3 s timer: one 2 s wait times out, the next sees it end
        child = env.client.result("p-child-7")
        assert child.status.name == "COMPLETED"
        assert 3 <= env.clock.now() - t0 < 10  # virtual time jumped while the parent's thread waited
        assert all(outcome == "COMPLETED" for runs in attempts(env, "p").values() for _, outcome in runs)


class AsyncStartAndWait(Step[int]):
    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self.client = client

    async def execute(self, context: AsyncContext, n: int) -> StepDecision:  # type: ignore[override]
        child_id = f"{context.flow_id}-child-{n}"
        await self.client().start_flow(Child(), child_id, str(n), TEN_MINUTES)
        result = await self.client().wait_for_flow(child_id, timedelta(minutes=1))
        return graceful_complete(result.single_output(str))


class AsyncParent(Flow[int]):
    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self.step = AsyncStartAndWait(client)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def test_an_async_parent_step_starts_a_child_with_the_async_client_and_waits_for_it() -> None:
    with DexTestEnv() as env:
        aclient = AsyncClient(engine=env.engine)
        env.client.start_flow(AsyncParent(lambda: aclient), "ap", 2, TEN_MINUTES)
        result = env.client.wait_for_flow("ap", timedelta(minutes=5))
        assert result.status.name == "COMPLETED", result
        assert result.single_output(str) == "child 2 done"
        assert env.client.result("ap-child-2").status.name == "COMPLETED"


def test_async_client_waits_outside_a_running_engine_drive_it_and_release_what_they_leave() -> None:
    with DexTestEnv() as env:
        aclient = AsyncClient(engine=env.engine)

        async def main() -> Any:
            await aclient.start_flow(TwoSteps(), "a1", 5, TEN_MINUTES)
            await aclient.wait_for_step_completion("a1", StepExecutionId("First"),
                                                   WaitForStepCompletionOptions(request_timeout=timedelta(minutes=1)))
            return await aclient.wait_for_flow("a1", timedelta(minutes=1))

        calls.clear()
        result = asyncio.run(main())
        assert result.single_output(int) == 6
        assert calls == [5]
        assert attempts(env, "a1")["Second-1"] == [(1, "COMPLETED")]


def test_a_client_call_from_another_thread_waits_for_the_running_drive() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Child(), "c1", "one", TEN_MINUTES)
        env.client.start_flow(Child(), "c2", "two", TEN_MINUTES)
        results: dict[str, Any] = {}

        def other() -> None:
            results["c2"] = env.client.wait_for_flow("c2", timedelta(minutes=1))

        thread = threading.Thread(target=other)
        thread.start()
        results["c1"] = env.client.wait_for_flow("c1", timedelta(minutes=1))
        thread.join(timeout=30)
        assert not thread.is_alive()
        assert results["c1"].single_output(str) == "child one done"
        assert results["c2"].single_output(str) == "child two done"


class Blocking(Step[int]):
    def __init__(self, client: Callable[[], Client]) -> None:
        self.client = client

    async def execute(self, context: AsyncContext, n: int) -> StepDecision:  # type: ignore[override]
        try:
            self.client().wait_for_flow("other", timedelta(seconds=1))
        except RuntimeError as exc:
            return graceful_complete(str(exc))
        return graceful_complete("it blocked the loop")


class BlockingFlow(Flow[int]):
    def __init__(self, client: Callable[[], Client]) -> None:
        self.step = Blocking(client)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def test_a_blocking_client_call_on_the_engines_own_loop_is_refused_with_a_clear_error() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Child(), "other", "x", TEN_MINUTES)
        result = env.run(BlockingFlow(lambda: env.client), 1, "b")
        assert "use AsyncClient" in result.single_output(str)


class Stopper(Step[str]):
    """Stops another flow through the client, from its handler thread, while the engine runs."""

    def __init__(self, client: Callable[[], Client]) -> None:
        self.client = client

    def execute(self, context: Context, other: str) -> StepDecision:
        self.client().stop_flow(other)
        return graceful_complete(self.client().result(other).status.name)


class StopperFlow(Flow[str]):
    def __init__(self, client: Callable[[], Client]) -> None:
        self.step = Stopper(client)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.step)


def test_a_step_stops_another_running_flow_through_the_client() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(Forked(), "victim", 1, TEN_MINUTES)
        env.client.wait_for_step_completion("victim", StepExecutionId("Quick"),
                                            WaitForStepCompletionOptions(request_timeout=timedelta(minutes=1)))
        env.client.start_flow(StopperFlow(lambda: env.client), "stopper", "victim", TEN_MINUTES)
        both = ["victim", "stopper"]
        env.drive(both, until=lambda: all(env.client.result(f).status.name != "RUNNING" for f in both))
        assert env.client.result("stopper").single_output(str) == "CANCELED"
        assert env.client.result("victim").status.name == "CANCELED"
        assert not env.engine.activity().running
