"""A clean stop (Ctrl-C) releases the attempts this process was running: they end INTERRUPTED,
their steps are runnable at once with their checkpoint, and they do not count as failures."""

from __future__ import annotations

import asyncio

import pytest

from dexcli import AsyncContext, Flow, RetryPolicy, Step, StepDecision, StepList, StepOptions, graceful_complete
from dexcli.engine.events import Event
from dexcli.testing import DexTestEnv


class Beats(Step[int]):
    def __init__(self) -> None:
        self.seen: list[tuple[int, int | None]] = []

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=2))

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        self.seen.append((context.attempt, context.get_last_heartbeat_value(int)))
        if context.attempt == 2:
            raise ValueError("a real failure")
        await context.heartbeat(input + context.attempt)
        if context.attempt == 1:
            await asyncio.sleep(100)  # interrupted here
        return graceful_complete(input + context.attempt)


class BeatFlow(Flow[int]):
    def __init__(self) -> None:
        self.beats = Beats()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.beats)


def test_ctrl_c_releases_the_running_attempt_without_counting_it() -> None:
    def ctrl_c_on_first_heartbeat(ev: Event) -> None:
        if ev.type == "heartbeat" and ev.data["attempt"] == 1:
            raise KeyboardInterrupt

    flow = BeatFlow()
    with DexTestEnv() as env:
        env.start(flow, 10, "f")
        env.engine.events.listeners.append(ctrl_c_on_first_heartbeat)
        with pytest.raises(KeyboardInterrupt):
            env.engine.drive(["f"], until=lambda: (row := env.engine.store.get_flow("f")) is None or not row.is_running)
        stopped_at = env.clock.now()
        [step] = env.inspect("f")["steps"]
        assert step["status"] == "QUEUED" and step["lastHeartbeatValue"] == 11
        assert [(a["outcome"], a["errorType"]) for a in step["attempts"]] == [("INTERRUPTED", None)]
        env.engine.events.listeners.remove(ctrl_c_on_first_heartbeat)
        result = env.client.wait_for_flow("f")
        # attempt 2 starts at once (no heartbeat timeout to wait for) and fails for real; with
        # maximum_attempts=2 the interrupted attempt does not count, so attempt 3 runs and completes
        assert result.single_output(int) == 13
        assert [a for a, _ in flow.beats.seen] == [1, 2, 3]
        assert flow.beats.seen[1] == (2, 11)  # the checkpoint survived the interruption
        attempts = env.inspect("f")["steps"][0]["attempts"]
        assert [a["outcome"] for a in attempts] == ["INTERRUPTED", "FAILED", "COMPLETED"]
        assert attempts[1]["startTime"] == attempts[0]["endTime"]
        assert env.clock.now() >= stopped_at


class CtrlCInside(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        if context.attempt == 1:
            raise KeyboardInterrupt  # where Ctrl-C lands when this task's code is what runs
        return graceful_complete(input)


class CtrlCInsideFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(CtrlCInside())


def test_ctrl_c_that_lands_in_the_attempts_own_code_releases_it_too() -> None:
    with DexTestEnv() as env:
        env.start(CtrlCInsideFlow(), 4, "f")
        with pytest.raises(KeyboardInterrupt):
            env.engine.drive(["f"], until=lambda: (row := env.engine.store.get_flow("f")) is None or not row.is_running)
        [step] = env.inspect("f")["steps"]
        assert step["status"] == "QUEUED"
        assert [a["outcome"] for a in step["attempts"]] == ["INTERRUPTED"]
        assert env.client.wait_for_flow("f").single_output(int) == 4
