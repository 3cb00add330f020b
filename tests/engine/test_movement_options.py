"""Options given with a movement (`go_to_many(StepMovement.of(B, x, options=...))`) are checked when the
decision is."""

from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Context,
    Flow,
    FlowErrorType,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    go_to_many,
    graceful_complete,
)
from dexcli.testing import DexTestEnv


class Unregistered(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Target(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Mover(Step[int]):
    def __init__(self, options: StepOptions) -> None:
        self.options = options

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Target, input, options=self.options))


class MoveFlow(Flow[int]):
    def __init__(self, options: StepOptions) -> None:
        self.mover, self.target = Mover(options), Target()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.mover).other_steps(self.target)


def run(options: StepOptions) -> tuple[str | None, str | None]:
    with DexTestEnv() as env:
        result = env.run(MoveFlow(options), 1, "f")
        return (result.error_type.value if result.error_type else None), result.error_message


def test_a_movement_routing_failures_to_an_unregistered_step_fails_the_attempt() -> None:
    error_type, message = run(StepOptions().on_execute_failure_proceed_to(Unregistered))
    assert error_type == FlowErrorType.WORKER_API_FAILED.value
    # the worker's detail of its InvalidStepResultError, as a Dex server reports it
    assert message == "flow MoveFlow, step Target: on_execute_failure_proceed_to(Unregistered) names a step " \
        "that is not registered"


def test_a_movement_with_a_heartbeat_timeout_under_10_s_fails_the_attempt() -> None:
    error_type, message = run(StepOptions(heartbeat_timeout=timedelta(seconds=5)))
    assert error_type == FlowErrorType.WORKER_API_FAILED.value
    assert message is not None and "heartbeat_timeout 5 s is under the 10 s minimum" in message


def test_valid_movement_options_apply_to_the_next_step() -> None:
    with DexTestEnv() as env:
        env.run(MoveFlow(StepOptions(heartbeat_timeout=timedelta(seconds=30))), 1, "f")
        target = next(s for s in env.inspect("f")["steps"] if s["stepType"] == "Target")
        assert target["options"]["heartbeatTimeout"] == 30
