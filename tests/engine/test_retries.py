"""retries — backoff, its defaults, maximum_attempts, retry_after, any exception."""

from dexcli import (
    Context,
    FlowErrorType,
    FlowStatus,
    RetryPolicy,
    Step,
    StepDecision,
    StepOptions,
    graceful_complete,
    retry_after,
)
from tests.engine.engine_flows import Flaky, Single, opts, secs
from tests.engine.engine_helpers import attempt_starts, attempts, history


def gaps(starts):
    return [round(b - a, 3) for a, b in zip(starts, starts[1:], strict=False)]


def test_backoff_is_initial_times_coefficient_power_capped_by_maximum_interval(env):
    flaky = Flaky(opts(initial=1, coefficient=3.0, maximum=5), fail_attempts=(1, 2, 3, 4))
    result = env.run(Single(flaky), 0, "f")
    assert result.single_output(int) == 5
    # delays 1*3^0=1, 1*3^1=3, min(9,5)=5, min(27,5)=5
    assert gaps(attempt_starts(env, "f", "Flaky-1")) == [1, 3, 5, 5]


def test_default_policy_1s_doubling_capped_at_100s_unlimited_attempts(env):
    flaky = Flaky(None, fail_attempts=tuple(range(1, 10)))  # no options at all
    result = env.run(Single(flaky), 0, "f")
    assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 10
    assert gaps(attempt_starts(env, "f", "Flaky-1")) == [1, 2, 4, 8, 16, 32, 64, 100, 100]


def test_first_attempt_at_and_attempt_number_across_retries(env):
    flaky = Flaky(None, fail_attempts=(1, 2))
    env.run(Single(flaky), 0, "f")
    assert [s["attempt"] for s in flaky.seen] == [1, 2, 3]
    assert len({s["first_attempt_at"] for s in flaky.seen}) == 1
    assert flaky.seen[0]["first_attempt_at"].timestamp() == int(env.t0)


def test_maximum_attempts_counts_the_first_attempt(env):
    result = env.run(Single(Flaky(opts(attempts=3), fail_always=True)), 0, "f")
    tries = attempts(env, "f", "Flaky-1")
    assert [a["attempt"] for a in tries] == [1, 2, 3]
    assert all(a["outcome"] == "FAILED" and a["errorType"] == "builtins.RuntimeError" for a in tries)
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "attempt 3 fails" in result.error_message  # the final attempt's error is the failure


def test_maximum_attempts_one_means_no_retry(env):
    env.run(Single(Flaky(opts(attempts=1), fail_always=True)), 0, "f")
    assert len(attempts(env, "f", "Flaky-1")) == 1


class Busy(Step[int]):
    """Attempt 1 asks to be retried after 30 s; attempt 2 fails normally; attempt 3 succeeds."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(initial_interval=secs(1), backoff_coefficient=2.0))

    def execute(self, context: Context, input: int) -> StepDecision:
        if context.attempt == 1:
            raise retry_after(30, ValueError("busy, come back later"))
        if context.attempt == 2:
            raise RuntimeError("plain failure")
        return graceful_complete("ok")


def test_retry_after_replaces_one_delay_and_reports_its_cause(env):
    result = env.run(Single(Busy()), 0, "f")
    assert result.status is FlowStatus.COMPLETED
    # 30 s instead of 1 s after attempt 1; the normal schedule (1*2^1 = 2 s) after attempt 2
    assert gaps(attempt_starts(env, "f", "Busy-1")) == [30, 2]
    a1 = attempts(env, "f", "Busy-1")[0]
    assert (a1["errorType"], a1["detail"]) == ("builtins.ValueError", "busy, come back later")


class NotReadyAsError(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=2))

    def execute(self, context: Context, input: int) -> StepDecision:
        raise retry_after(5, KeyError("k"))


def test_retry_after_does_not_lift_maximum_attempts(env):
    env.run(Single(NotReadyAsError()), 0, "f")
    assert len(attempts(env, "f", "NotReadyAsError-1")) == 2
    [failed] = [e for e in history(env, "f") if e["type"] == "StepExecuteFailed"]
    assert failed["errorType"] == "builtins.KeyError"


class Weird(Exception):
    pass


def test_any_exception_is_transient(env):
    errors = [lambda n: ZeroDivisionError("x"), lambda n: Weird("odd"), lambda n: AssertionError()]

    def err(n):
        return errors[n - 1](n) if n <= len(errors) else None

    flaky = Flaky(None, fail_attempts=(1, 2, 3), error=err)
    result = env.run(Single(flaky), 0, "f")
    assert result.single_output(int) == 4
    types = [a["errorType"] for a in attempts(env, "f", "Flaky-1")]
    assert types == ["builtins.ZeroDivisionError", f"{Weird.__module__}.Weird", "builtins.AssertionError", None]
    # an exception with no message reports its class name as the detail
    assert attempts(env, "f", "Flaky-1")[2]["detail"] == "AssertionError"
