"""decisions — graceful/force complete, force_fail, dead_end, go_to_many, outputs."""

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    InvalidStepResultError,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    dead_end,
    force_complete,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
)
from tests.engine.engine_helpers import history, history_types, rel, step, step_ids


class Fork(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Fast, "fast"), StepMovement.of(Slow, input))


class Fast(Step[str]):
    def __init__(self, decide: Any) -> None:
        self.decide = decide

    def execute(self, context: Context, input: str) -> StepDecision:
        return self.decide(input)


class Slow(Step[int]):
    """Sleeps `input` seconds, then decides (graceful_complete("slow") by default)."""

    def __init__(self, decide: Any = None) -> None:
        self.decide = decide or (lambda: graceful_complete("slow"))
        self.cancelled_at: list[float] = []

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        loop = asyncio.get_running_loop()
        try:
            for _ in range(input):
                await asyncio.sleep(1)
                await context.heartbeat()
        except asyncio.CancelledError:
            self.cancelled_at.append(loop.time())
            raise
        return self.decide()


class Later(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(input)
        return dead_end()


class ForkFlow(Flow[int]):
    def __init__(self, fast: Fast, slow: Slow | None = None) -> None:
        self.fork, self.fast, self.slow, self.later = Fork(), fast, slow or Slow(), Later()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.fork).other_steps(self.fast, self.slow, self.later)


def close_time(env, flow_id):
    return rel(env, env.inspect(flow_id)["summary"]["closeTime"])


def test_graceful_complete_waits_for_the_other_branches(env):
    result = env.run(ForkFlow(Fast(graceful_complete)), 30, "f")
    assert result.status is FlowStatus.COMPLETED
    assert [(c.step_execution_id, c.output) for c in result.completions] == [("Fast-1", "fast"), ("Slow-1", "slow")]
    assert close_time(env, "f") == 30
    assert step(env, "f", "Slow-1")["status"] == "COMPLETED"


def test_graceful_complete_also_waits_for_steps_queued_later(env):
    slow = Slow(lambda: go_to(Later, 10))
    result = env.run(ForkFlow(Fast(graceful_complete), slow), 30, "f")
    assert result.status is FlowStatus.COMPLETED
    assert [c.output for c in result.completions] == ["fast"]
    assert close_time(env, "f") == 40
    assert step(env, "f", "Later-1")["status"] == "COMPLETED"


def test_force_complete_completes_at_once_and_abandons_other_steps(env):
    slow = Slow()
    result = env.run(ForkFlow(Fast(force_complete), slow), 30, "f")
    assert result.status is FlowStatus.COMPLETED
    assert [c.output for c in result.completions] == ["fast"]
    assert close_time(env, "f") == 0
    assert step(env, "f", "Slow-1")["status"] == "CANCELED"
    assert [t - env.t0 for t in slow.cancelled_at] == [0]  # its running task was cancelled


def test_force_complete_result_holds_outputs_collected_so_far(env):
    result = env.run(ForkFlow(Fast(graceful_complete), Slow(lambda: force_complete("slow"))), 5, "f")
    assert [c.output for c in result.completions] == ["fast", "slow"]


def test_force_fail_fails_at_once_with_step_decision_failed_and_the_reason(env):
    slow = Slow()
    result = env.run(ForkFlow(Fast(lambda s: force_fail(f"{s} says no")), slow), 30, "f")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "fast says no"
    assert result.completions == ()  # a reason is not a completion
    assert close_time(env, "f") == 0
    assert step(env, "f", "Slow-1")["status"] == "CANCELED"
    closed = history(env, "f")[-1]
    assert (closed["type"], closed["flowStatus"], closed["errorType"], closed["errorMessage"]) == (
        "FlowClosed", "FAILED", "STEP_DECISION_FAILED", "fast says no")


def test_dead_end_ends_one_branch_only(env):
    result = env.run(ForkFlow(Fast(lambda s: dead_end())), 30, "f")
    assert result.status is FlowStatus.COMPLETED
    assert [c.output for c in result.completions] == ["slow"]
    assert close_time(env, "f") == 30


class Alone(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class AloneFlow(Flow[int]):
    def __init__(self) -> None:
        self.alone = Alone()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.alone)


def test_when_every_branch_dead_ends_the_flow_stays_running(env):
    env.start(AloneFlow(), 0, "f")
    env.drive()  # until nothing is left to run
    assert env.result("f").status is FlowStatus.RUNNING
    assert history_types(env, "f") == ["FlowStarted", "StepExecuteCompleted"]
    assert env.inspect("f")["summary"]["closeTime"] is None


class Twice(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Out, 1), StepMovement.of(Out, 2))


class Out(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        if input == 1:
            return graceful_complete()  # no output: not a completion
        return graceful_complete(None)  # a null output: not one either, as on a Dex server


class TwiceFlow(Flow[int]):
    def __init__(self) -> None:
        self.twice, self.out = Twice(), Out()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.twice).other_steps(self.out)


def test_same_type_twice_gets_numbered_and_neither_an_omitted_nor_a_null_output_is_collected(env):
    result = env.run(TwiceFlow(), 0, "f")
    assert step_ids(env, "f") == ["Twice-1", "Out-1", "Out-2"]
    assert result.completions == ()
    # the decisions still tell them apart
    assert [step(env, "f", s)["decision"] for s in ("Out-1", "Out-2")] == [
        {"kind": "gracefulComplete"}, {"kind": "gracefulComplete", "output": None}]
    assert [step(env, "f", s)["fromStepExecutionId"] for s in ("Out-1", "Out-2")] == ["Twice-1", "Twice-1"]


def test_single_output_needs_exactly_one_completion(env):
    result = env.run(ForkFlow(Fast(graceful_complete)), 1, "f")
    assert len(result.completions) == 2
    with pytest.raises(ValueError):
        result.single_output(str)


def test_an_empty_go_to_many_is_invalid():
    with pytest.raises(InvalidStepResultError):
        go_to_many()


# --- movement options and context fields ---------------------------------------------------------

class Mover(Step[int]):
    def __init__(self, movement_options: Any) -> None:
        self.movement_options = movement_options

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=2))

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Target, input + 1, options=self.movement_options))


class Target(Step[int]):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=5))

    def execute(self, context: Context, input: int) -> StepDecision:
        self.seen.append({"flow_id": context.flow_id, "run_id": context.run_id,
                          "seid": context.step_execution_id, "from": context.from_step_execution_id,
                          "attempt": context.attempt})
        raise RuntimeError("always")


class MoverFlow(Flow[int]):
    def __init__(self, movement_options: Any) -> None:
        self.mover, self.target = Mover(movement_options), Target()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.mover).other_steps(self.target)


def test_movement_options_replace_the_target_options(env):
    flow = MoverFlow(StepOptions(execute_retry=RetryPolicy(maximum_attempts=2)))
    env.run(flow, 0, "f")
    assert [s["attempt"] for s in flow.target.seen] == [1, 2]  # not 5
    run_id = env.client.describe_flow("f").run_id
    assert flow.target.seen[0] == {"flow_id": "f", "run_id": run_id, "seid": "Target-1", "from": "Mover-1",
                                   "attempt": 1}


def test_a_movement_with_a_heartbeat_timeout_under_10_s_is_an_invalid_decision(env):
    flow = MoverFlow(StepOptions(heartbeat_timeout=timedelta(seconds=5)))
    env.run(flow, 0, "f")
    result = env.result("f")
    assert result.status is FlowStatus.FAILED and result.error_type is FlowErrorType.WORKER_API_FAILED
    [a, _] = step(env, "f", "Mover-1")["attempts"]
    assert a["errorType"] == "dexcli.sdk.errors.InvalidStepResultError" and "10 s" in a["detail"]
    assert "Target-1" not in step_ids(env, "f")
