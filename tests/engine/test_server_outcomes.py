"""How a flow's outcomes read as on a Dex server (issue 23, rules 1, 3, 4, 10, 11, 17), in
virtual time: the failure texts client code receives, null outputs, a WaitFor failing with
PROCEED, a failed flow's result, a start delay with a flow timeout, and a timer's firing time.

The server's source (`superdurable/dex`) is the authority: each test names the rule it pins.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    RecoveryErrorInfo,
    RetryPolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    WaitForFailurePolicy,
    force_complete,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
)
from dexcli.testing import DexTestEnv
from tests.engine.engine_flows import Beat, Flaky, Single, opts
from tests.engine.engine_helpers import attempts, history, rel, step


class Record(Step[int]):
    """The recovery step: keeps what `context.recovery_error` held."""

    def __init__(self) -> None:
        self.seen: list[RecoveryErrorInfo | None] = []

    def execute(self, context: Context, input: int) -> StepDecision:
        self.seen.append(context.recovery_error)
        return graceful_complete("recorded")


class Hang(Step[int]):
    """Never finishes by itself: sends a heartbeat every `every` seconds (none when None)."""

    def __init__(self, options: StepOptions, every: float | None = None) -> None:
        self.options = options
        self.every = every

    def get_step_options(self) -> StepOptions:
        return self.options

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        while True:
            await asyncio.sleep(self.every or 10**6)
            await context.heartbeat(0)


# --- rule 1: the timeout and failure texts client code receives are the server's ------------
# The server's recovery error for a timeout is Temporal's (workflowProvider.go MapToRecoveryError:
# Detail = timeoutError.Message(), "activity StartToClose timeout"); a flow that fails for good
# reports the worker's detail (errorStatus.go ServiceErrorResponseDetail), or for a timeout the
# Temporal error, which holds that same text (server/integ/wf_state_api_timeout_test.go).

TIMEOUTS = [
    ("StartToClose", opts(timeout=10, attempts=1), None, "ExecuteMethodTimeout of 10 s expired"),
    ("Heartbeat", opts(heartbeat=20, attempts=1), None,
     "no heartbeat or Stream message within HeartbeatTimeout of 20 s"),
    ("ScheduleToClose", opts(heartbeat=60, total=30), 10, "TotalDuration of 30 s expired"),
]


@pytest.mark.parametrize(("kind", "options", "every", "explanation"), TIMEOUTS, ids=[k for k, *_ in TIMEOUTS])
def test_a_timeout_s_recovery_error_is_temporal_s_and_inspect_keeps_dex_s_explanation(
        env: DexTestEnv, kind: str, options: StepOptions, every: float | None, explanation: str) -> None:
    record = Record()
    result = env.run(Single(Hang(options.on_execute_failure_proceed_to(Record), every), record), 0, "f")
    assert result.single_output(str) == "recorded"
    assert record.seen == [RecoveryErrorInfo(detail=f"activity {kind} timeout", error_type=kind)]
    assert step(env, "f", "Record-1")["recoveryError"] == {"errorType": kind, "detail": f"activity {kind} timeout"}
    last = attempts(env, "f", "Hang-1")[-1]
    assert (last["outcome"], last["errorType"], last["detail"]) == ("TIMED_OUT", kind, explanation)


def test_a_flow_failed_by_a_raised_exception_reports_the_worker_s_detail(env: DexTestEnv) -> None:
    result = env.run(Single(Flaky(opts(attempts=3), fail_always=True)), 0, "f")
    assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.WORKER_API_FAILED)
    assert result.error_message == "attempt 3 fails"
    [failed] = [e for e in history(env, "f") if e["type"] == "StepExecuteFailed"]  # dex's account, beside it
    assert (failed["stepExecutionId"], failed["attempt"], failed["errorType"], failed["detail"], failed["reason"]) \
        == ("Flaky-1", 3, "builtins.RuntimeError", "attempt 3 fails", "attempts exhausted")
    assert history(env, "f")[-1]["errorMessage"] == "attempt 3 fails"


def test_a_flow_failed_by_a_timeout_reports_temporal_s_timeout_text(env: DexTestEnv) -> None:
    result = env.run(Single(Hang(opts(timeout=10, attempts=2))), 0, "f")
    assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.WORKER_API_FAILED)
    assert result.error_message == "activity StartToClose timeout"
    assert env.inspect("f")["summary"]["errorMessage"] == "activity StartToClose timeout"


class BrokenWait(Step[int]):
    """wait_for raises in every attempt (2 attempts); execute reports what it saw."""

    def __init__(self, policy: WaitForFailurePolicy, timeout: bool = False) -> None:
        self.policy = policy
        self.timeout = timeout
        self.seen: list[RecoveryErrorInfo | None] = []

    def get_step_options(self) -> StepOptions:
        return StepOptions(wait_for_retry=RetryPolicy(maximum_attempts=2), wait_for_failure=self.policy,
                           wait_for_method_timeout=timedelta(seconds=5) if self.timeout else None)

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:
        if self.timeout:
            await asyncio.sleep(60)
        raise ValueError(f"cannot wait (attempt {context.attempt})")

    def execute(self, context: Context, input: int) -> StepDecision:
        self.seen.append(context.recovery_error)
        return graceful_complete(context.wait_for_method_failed())


def test_a_wait_for_that_fails_the_flow_reports_the_worker_s_detail(env: DexTestEnv) -> None:
    result = env.run(Single(BrokenWait(WaitForFailurePolicy.FAIL_FLOW)), 0, "f")
    assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.WORKER_API_FAILED)
    assert result.error_message == "cannot wait (attempt 2)"


# --- rule 4: a WaitFor failing with PROCEED sets context.recovery_error --------------------
# workflowImpl.go: `conditionResults.WaitForFailed = true; executionContext.RecoveryError =
# MapToRecoveryError(waitForMethErr)`.

def test_wait_for_failing_with_proceed_gives_execute_the_recovery_error(env: DexTestEnv) -> None:
    broken = BrokenWait(WaitForFailurePolicy.PROCEED)
    result = env.run(Single(broken), 0, "f")
    assert result.single_output(bool) is True
    assert broken.seen == [RecoveryErrorInfo(detail="cannot wait (attempt 2)", error_type="builtins.ValueError")]
    assert step(env, "f", "BrokenWait-1")["recoveryError"] == {
        "errorType": "builtins.ValueError", "detail": "cannot wait (attempt 2)"}


def test_wait_for_timing_out_with_proceed_gives_execute_temporal_s_timeout(env: DexTestEnv) -> None:
    broken = BrokenWait(WaitForFailurePolicy.PROCEED, timeout=True)
    env.run(Single(broken), 0, "f")
    assert broken.seen == [RecoveryErrorInfo(detail="activity StartToClose timeout", error_type="StartToClose")]


# --- rule 3: null outputs are dropped (outputCollector.go: `utils.IsNullValue` is skipped) ---

class Out(Step[int]):
    """Completes with no value for input 0 (None as the output), else "out <input>"; forced when `force`."""

    def __init__(self, force: bool = False) -> None:
        self.force = force

    def execute(self, context: Context, input: int) -> StepDecision:
        output = None if input == 0 else f"out {input}"
        return force_complete(output) if self.force else graceful_complete(output)


class Fan(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Out, 0), StepMovement.of(Out, 1))


def test_graceful_complete_none_adds_no_completion(env: DexTestEnv) -> None:
    result = env.run(Single(Fan(), Out()), 0, "f")
    assert result.status is FlowStatus.COMPLETED
    assert [c.step_execution_id for c in result.completions] == ["Out-2"]
    assert result.single_output(str) == "out 1"
    assert [c["output"] for c in env.inspect("f")["summary"]["completions"]] == ["out 1"]


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "force"])
def test_a_flow_completed_with_none_has_no_completions(env: DexTestEnv, force: bool) -> None:
    result = env.run(Single(Out(force)), 0, "f")
    assert result.status is FlowStatus.COMPLETED and result.completions == ()
    with pytest.raises(ValueError):  # as SDK 1.23: no output, no single_output
        result.single_output(str)


# --- rule 10: a FAILED flow's result holds no completions (service.go WaitForFlow returns
# results only for a run that completed) ---------------------------------------------------

class Early(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Out, 7), StepMovement.of(Later, 0))


class Later(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return force_fail("bad thing")


def test_a_failed_flow_s_result_holds_no_completions(env: DexTestEnv) -> None:
    result = env.run(Single(Early(), Out(), Later()), 0, "f")
    assert (result.status, result.error_type, result.error_message) == (
        FlowStatus.FAILED, FlowErrorType.STEP_DECISION_FAILED, "bad thing")
    assert result.completions == ()
    assert env.inspect("f")["summary"]["completions"] == []
    assert step(env, "f", "Out-1")["decision"]["output"] == "out 7"  # the step's own decision stays


# --- rule 11: the flow timeout counts from the end of the start delay (flowTimeout.go: the
# deadline is `provider.Now(ctx) + timeout` when the workflow first runs, after the delay) ---

DELAYED = StartFlowOptions(start_delay=timedelta(seconds=100), timeout=timedelta(seconds=50))


def test_a_step_that_ends_within_the_timeout_after_the_delay_completes(env: DexTestEnv) -> None:
    env.client.start_flow(Single(Beat(opts(heartbeat=30), every=10, finish_after=30)), "f", 0, DELAYED)
    assert rel(env, env.inspect("f")["summary"]["timeoutTime"]) == 150
    assert rel(env, history(env, "f")[0]["timeoutTime"]) == 150
    assert env.client.wait_for_flow("f").single_output(str) == "done after 3 beats"
    assert rel(env, step(env, "f", "Beat-1")["firstAttemptTime"]) == 100


def test_the_flow_timeout_fires_its_timeout_after_the_end_of_the_delay(env: DexTestEnv) -> None:
    env.client.start_flow(Single(Beat(opts(heartbeat=30), every=10)), "f", 0, DELAYED)
    result = env.client.wait_for_flow("f")
    assert (result.error_type, result.error_message) == (FlowErrorType.FLOW_TIMEOUT, "Flow timed out after 50 seconds")
    assert rel(env, env.inspect("f")["summary"]["closeTime"]) == 150
    assert rel(env, step(env, "f", "Beat-1")["firstAttemptTime"]) == 100


# --- rule 17: a timer fires at whole seconds, the commit time rounded down (timers/utils.go:
# `FiringUnixTimestampSeconds: now.Unix() + durationSeconds`) ------------------------------

class Pause(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(0.6)
        return go_to(Remind, input)


class Remind(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input), condition_id="remind"))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(context.has_timer_fired())


class TimerFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Pause()).other_steps(Remind())


def test_a_timer_s_firing_time_is_its_commit_time_rounded_down_to_the_second() -> None:
    with DexTestEnv(start=1000.0) as env:
        env.start(TimerFlow(), 3600, "f")
        env.drive(["f"], until=lambda: env.inspect("f")["steps"][-1]["status"] == "WAITING")
        [waiting] = env.inspect("f")["state"]["activeStepExecutions"]
        # committed at 1000.6: fires at 1000 + 3600, not at 4600.6
        assert waiting["timers"][0]["firingTime"] == "1970-01-01T01:16:40.000Z"
        assert env.client.wait_for_flow("f").single_output(bool) is True
        [wait_for, execute] = attempts(env, "f", "Remind-1")
        assert (wait_for["method"], wait_for["endTime"]) == ("WAIT_FOR", "1970-01-01T00:16:40.600Z")
        assert (execute["method"], execute["startTime"]) == ("EXECUTE", "1970-01-01T01:16:40.000Z")
