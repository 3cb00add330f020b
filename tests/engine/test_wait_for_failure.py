"""wait_for failing for good: WaitForFailurePolicy.PROCEED runs execute anyway (with
wait_for_method_failed() true); FAIL_FLOW fails the flow. wait_for has its own retry policy."""

from __future__ import annotations

from dexcli import (
    Context,
    Flow,
    FlowStatus,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Wait,
    WaitForFailurePolicy,
    graceful_complete,
)
from dexcli.testing import DexTestEnv


class Broken(Step[int]):
    def __init__(self, policy: WaitForFailurePolicy) -> None:
        self.policy = policy

    def get_step_options(self) -> StepOptions:
        return StepOptions(wait_for_retry=RetryPolicy(maximum_attempts=2), wait_for_failure=self.policy)

    def wait_for(self, context: Context, input: int) -> Wait:
        raise RuntimeError(f"wait_for attempt {context.attempt} cannot build its Wait")

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete({"waitForFailed": context.wait_for_method_failed(), "attempt": context.attempt})


class BrokenFlow(Flow[int]):
    def __init__(self, policy: WaitForFailurePolicy) -> None:
        self.step = Broken(policy)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def test_proceed_runs_execute_after_wait_for_is_exhausted() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(BrokenFlow(WaitForFailurePolicy.PROCEED), 1, "p")
        assert result.single_output() == {"waitForFailed": True, "attempt": 1}
        [step] = env.inspect("p")["steps"]
        assert [(a["method"], a["attempt"], a["outcome"]) for a in step["attempts"]] == [
            ("WAIT_FOR", 1, "FAILED"), ("WAIT_FOR", 2, "FAILED"), ("EXECUTE", 1, "COMPLETED")]
        assert "StepWaitForFailed" in [e["type"] for e in env.inspect("p")["history"]]


def test_fail_flow_fails_the_flow_once_wait_for_is_exhausted() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(BrokenFlow(WaitForFailurePolicy.FAIL_FLOW), 1, "f")
        assert result.status is FlowStatus.FAILED
        assert result.error_message == "wait_for attempt 2 cannot build its Wait"  # the worker's detail
        [failed] = [e for e in env.inspect("f")["history"] if e["type"] == "StepWaitForFailed"]
        assert (failed["attempt"], failed["reason"]) == (2, "attempts exhausted")
