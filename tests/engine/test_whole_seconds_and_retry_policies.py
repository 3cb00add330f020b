"""Values the official SDK and the server refuse (issue 23, rules 6 and 16), refused here too:
a StepOptions duration that is not whole seconds (SDK 1.23 encodes durations as whole seconds
within int32) and a retry policy with a backoff coefficient under 1 or a maximum interval
under the initial one (the server's Temporal rejects it, with the defaults filled in). At
registration for a step's own options, when the decision is checked for a movement's, and a
Timer of a fractional duration fails its wait_for attempt, which is retried, as the SDK's
encoding failure is."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dexcli import (
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)
from dexcli.sdk.errors import FlowDefinitionError
from dexcli.testing import DexTestEnv
from tests.engine.test_movement_options import run as run_with_movement_options


def secs(s: float) -> timedelta:
    return timedelta(seconds=s)


class Work(Step[int]):
    def __init__(self, options: StepOptions) -> None:
        self.options = options

    def get_step_options(self) -> StepOptions:
        return self.options

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class One(Flow[int]):
    def __init__(self, options: StepOptions) -> None:
        self.work = Work(options)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.work)


REFUSED = [
    (StepOptions(execute_method_timeout=secs(1.5)),
     "execute_method_timeout 1.5 s: a duration must be whole seconds within int32"),
    (StepOptions(wait_for_method_timeout=secs(0.5)), "wait_for_method_timeout 0.5 s: a duration must be whole"),
    (StepOptions(heartbeat_timeout=secs(10.5)), "heartbeat_timeout 10.5 s: a duration must be whole"),
    (StepOptions(execute_retry=RetryPolicy(initial_interval=secs(0.5))),
     "execute_retry.initial_interval 0.5 s: a duration must be whole"),
    (StepOptions(wait_for_retry=RetryPolicy(total_duration=secs(90.25))),
     "wait_for_retry.total_duration 90.25 s: a duration must be whole"),
    (StepOptions(execute_method_timeout=secs(2**31)), "execute_method_timeout 2147483648 s: a duration must be"),
    (StepOptions(wait_for_method_timeout=secs(-1)), "wait_for_method_timeout must not be negative"),
    (StepOptions(execute_retry=RetryPolicy(backoff_coefficient=0.5)),
     "execute_retry.backoff_coefficient 0.5 is less than 1"),
    (StepOptions(wait_for_retry=RetryPolicy(initial_interval=secs(10), maximum_interval=secs(5))),
     "wait_for_retry.maximum_interval 5 s is less than initial_interval 10 s"),
    (StepOptions(execute_retry=RetryPolicy(initial_interval=secs(200))),
     "execute_retry.maximum_interval 100 s (the default) is less than initial_interval 200 s"),
]


@pytest.mark.parametrize(("options", "line"), REFUSED)
def test_refused_at_registration_in_one_line(options: StepOptions, line: str) -> None:
    with DexTestEnv() as env:
        with pytest.raises(FlowDefinitionError) as info:
            env.start(One(options), 1, "f")
        assert env.store.get_flow("f") is None  # nothing started
    [problem] = info.value.problems
    assert problem.startswith("flow One, step Work: ") and line in problem


@pytest.mark.parametrize("options", [
    StepOptions(execute_method_timeout=secs(30), heartbeat_timeout=secs(10)),
    StepOptions(execute_retry=RetryPolicy(initial_interval=secs(5), backoff_coefficient=1.0,
                                          maximum_interval=secs(5), total_duration=secs(60))),
    StepOptions(execute_retry=RetryPolicy(initial_interval=secs(100))),  # equal to the default maximum
])
def test_whole_seconds_and_valid_policies_register_and_run(options: StepOptions) -> None:
    with DexTestEnv() as env:
        assert env.run(One(options), 1, "f").status is FlowStatus.COMPLETED


@pytest.mark.parametrize(("options", "line"), [REFUSED[0], REFUSED[7], REFUSED[8]])
def test_refused_in_a_movements_options_when_the_decision_is_checked(options: StepOptions, line: str) -> None:
    error_type, message = run_with_movement_options(options)
    assert error_type == FlowErrorType.WORKER_API_FAILED.value
    assert message is not None and line in message  # the worker's detail, as the server reports it (rule 1)


class FractionalTimer(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(wait_for_retry=RetryPolicy(maximum_attempts=3))

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(secs(1.5)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete("fired")


class TimerFlow(Flow[int]):
    def __init__(self) -> None:
        self.step = FractionalTimer()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def test_a_fractional_timer_fails_its_wait_for_attempt_and_never_fires() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(TimerFlow(), 1, "f")
        assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.WORKER_API_FAILED)
        assert result.completions == ()
        [step] = env.inspect("f")["steps"]
        # each wait_for attempt fails as the SDK's encoding of the Wait does, and is retried
        assert [(a["method"], a["outcome"], a["detail"]) for a in step["attempts"]] == [
            ("WAIT_FOR", "FAILED", "Timer.by_duration(1.5 s): timer duration must use whole seconds")] * 3
        assert env.clock.now() == 3.0  # the retries' backoff (1 s, 2 s); the 1.5 s timer was never set


class FractionalRpc(One):
    @rpc(timeout=secs(2.5))
    def peek(self, context: Context) -> RPCResult[int]:
        return RPCResult(1)


def test_an_rpc_timeout_that_is_not_whole_seconds_is_refused_at_registration() -> None:
    """SDK 1.23 refuses it when the RPC is invoked (`_seconds32`); dex as the flow registers."""
    with DexTestEnv() as env, pytest.raises(FlowDefinitionError) as info:
        env.start(FractionalRpc(StepOptions()), 1, "f")
    assert info.value.problems == [
        "flow FractionalRpc: RPC peek: timeout 2.5 s: a duration must be whole seconds within int32 (as Dex sends it)"]
