"""Flow retry (StartFlowOptions.retry_policy, SubFlowOptions.retry_policy), in virtual time: a run
that ends FAILED starts again as a new run of the same flow id after the policy's backoff, with
the same input, until it completes or its attempts run out (the last failure stands);
`wait_for_flow` follows the runs, a SubFlow parent sees only the child's final result, inspect
lists the runs (`via` flowRetry) and shows the policy. What dex cannot apply is refused."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    Attribute,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StopFlowOptions,
    SubFlow,
    Wait,
    force_fail,
    graceful_complete,
)
from dexcli.engine.doctor import check
from dexcli.flow_options import FlowTimeoutPolicy, StopType, SubFlowOptions
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

T0 = 1_000_000.0
TRIES = Attribute("tries", int)
SEEN: dict[str, Any] = {"runs": []}


class Flaky(Step[int]):
    """Fails (force_fail) until the flow's run is number `input`; records when each run began."""

    def execute(self, context: Context, input: int) -> StepDecision:
        SEEN.setdefault("times", []).append(SEEN["clock"]())
        n = len(SEEN["times"])
        if n < input:
            return force_fail(f"run {n} failed")
        return graceful_complete(n * 10 + (TRIES.get(context) or 0))


class FlakyFlow(Flow[int]):
    def __init__(self) -> None:
        self.flaky = Flaky()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.flaky)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(TRIES)


def policy(attempts: int = 3, initial: int = 10, coefficient: float = 2.0, maximum: int = 100) -> RetryPolicy:
    return RetryPolicy(initial_interval=timedelta(seconds=initial), backoff_coefficient=coefficient,
                       maximum_interval=timedelta(seconds=maximum), maximum_attempts=attempts)


@pytest.fixture
def env(tmp_path: Any) -> Any:
    SEEN.clear()
    SEEN["runs"] = []
    with DexTestEnv(tmp_path / "dex.db", start=T0) as e:
        SEEN["clock"] = e.clock.now
        yield e


def test_two_failures_then_success_makes_three_runs_and_completes(env: DexTestEnv) -> None:
    first = env.client.start_flow(FlakyFlow(), "f", 3, StartFlowOptions(retry_policy=policy(3)))
    result = env.client.wait_for_flow("f")  # follows the retries
    assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 30
    # backoff 10 s after run 1, 20 s after run 2 (initial * coefficient^(n-1))
    assert [round(t - T0) for t in SEEN["times"]] == [0, 10, 30]
    snap = env.inspect("f")
    runs = snap["runs"]
    assert [r["status"] for r in runs] == ["FAILED", "FAILED", "COMPLETED"]
    assert [r["via"] for r in runs] == [None, "flowRetry", "flowRetry"]
    assert runs[0]["runId"] == first and runs[1]["previousRunId"] == first
    assert runs[2]["previousRunId"] == runs[1]["runId"] == snap["summary"]["flowRetry"]["previousRunId"]
    retry = snap["summary"]["flowRetry"]
    assert retry["attempt"] == 3 and retry["firstRunId"] == first
    assert retry["retryPolicy"] == {"initialInterval": 10, "backoffCoefficient": 2.0, "maximumInterval": 100,
                                    "maximumAttempts": 3}
    started = snap["history"][0]
    assert started["type"] == "FlowStarted" and started["retryOfRunId"] == runs[1]["runId"]
    assert (started["attempt"], started["backoffSeconds"]) == (3, 20.0)
    old = env.inspect(runs[0]["flowId"])
    assert old["summary"]["flowStatus"] == "FAILED" and old["summary"]["errorMessage"] == "run 1 failed"
    closed = old["history"][-1]
    assert closed["type"] == "FlowClosed" and closed["retryState"] == "IN_PROGRESS"
    assert closed["retriedToRunId"] == runs[1]["runId"]
    assert check(env.store)[0] == []  # every run's steps and history agree (dex doctor)
    retried = [e for e in env.events if e["type"] == "flowRetried"]
    assert [e["attempt"] for e in retried] == [2, 3]


def test_exhausted_attempts_leave_the_last_failure_standing(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 9, StartFlowOptions(retry_policy=policy(2)))
    result = env.client.wait_for_flow("f")
    assert result.status is FlowStatus.FAILED and result.error_message == "run 2 failed"
    assert len(SEEN["times"]) == 2
    snap = env.inspect("f")
    assert [r["status"] for r in snap["runs"]] == ["FAILED", "FAILED"]
    assert snap["summary"]["flowRetry"]["retryState"] == "MAXIMUM_ATTEMPTS_REACHED"
    assert snap["history"][-1]["retryState"] == "MAXIMUM_ATTEMPTS_REACHED"
    assert "retriedToRunId" not in snap["history"][-1]


def test_a_time_travel_keeps_the_retry_policy_and_counts_attempts_anew(env: DexTestEnv) -> None:
    from dexcli.flow_options import TimeTravelOptions, TimeTravelType

    env.client.start_flow(FlakyFlow(), "f", 4, StartFlowOptions(retry_policy=policy(2)))
    assert env.client.wait_for_flow("f").status is FlowStatus.FAILED  # runs 1 and 2 failed
    env.client.time_travel("f", TimeTravelOptions(TimeTravelType.BEGINNING))
    assert env.inspect("f")["summary"]["flowRetry"]["attempt"] == 1
    result = env.client.wait_for_flow("f")  # run 3 fails, its retry (run 4) completes
    assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 40
    assert [r["via"] for r in env.inspect("f")["runs"]] == [None, "flowRetry", "timeTravel", "flowRetry"]


def test_backoff_grows_by_the_coefficient_and_is_capped(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 5, StartFlowOptions(retry_policy=policy(0, 10, 3.0, 50)))
    assert env.client.wait_for_flow("f").single_output(int) == 50
    gaps = [round(b - a) for a, b in zip(SEEN["times"], SEEN["times"][1:], strict=False)]
    assert gaps == [10, 30, 50, 50]  # 10, 30, 90 -> capped at 50


def test_defaults_are_the_servers(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 3, StartFlowOptions(retry_policy=RetryPolicy(maximum_attempts=3)))
    assert env.client.wait_for_flow("f").status is FlowStatus.COMPLETED
    assert [round(t - T0) for t in SEEN["times"]] == [0, 1, 3]  # 1 s, then x2
    assert env.inspect("f")["summary"]["flowRetry"]["retryPolicy"]["maximumInterval"] == 100


def test_the_retry_run_gets_the_same_input_and_initial_attributes(env: DexTestEnv) -> None:
    options = StartFlowOptions(retry_policy=policy(3)).with_attribute(TRIES, 7)
    env.client.start_flow(FlakyFlow(), "f", 2, options)
    assert env.client.wait_for_flow("f").single_output(int) == 27
    assert env.inspect("f")["state"]["attributes"] == {"tries": 7}


def test_a_flow_without_a_policy_fails_once(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 3)
    assert env.client.wait_for_flow("f").status is FlowStatus.FAILED
    assert len(SEEN["times"]) == 1 and "flowRetry" not in env.inspect("f")["summary"]


def test_a_client_stop_with_fail_is_retried_but_cancel_is_not(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 1, StartFlowOptions(retry_policy=policy(3), start_delay=timedelta(
        seconds=60)))
    env.client.stop_flow("f", StopFlowOptions(StopType.FAIL, "stop it"))  # as the server: an error the backend retries
    assert env.store.get_flow("f").is_running  # type: ignore[union-attr]
    assert env.client.wait_for_flow("f").status is FlowStatus.COMPLETED
    runs = env.inspect("f")["runs"]
    assert [r["status"] for r in runs] == ["FAILED", "COMPLETED"]
    assert env.inspect(runs[0]["flowId"])["summary"]["errorMessage"] == "stop it"
    env.client.start_flow(FlakyFlow(), "g", 9, StartFlowOptions(retry_policy=policy(3), start_delay=timedelta(
        seconds=60)))
    env.client.stop_flow("g", StopFlowOptions(StopType.CANCEL))
    assert env.client.wait_for_flow("g").status is FlowStatus.CANCELED
    assert [r["status"] for r in env.inspect("g")["runs"]] == ["CANCELED"]


def test_a_flow_timeout_under_fail_is_retried_with_a_fresh_budget(env: DexTestEnv) -> None:
    class Slow(Step[None]):
        def wait_for(self, context: Context, input: None) -> Wait:
            from dexcli import Timer
            return Wait.until(Timer.by_duration(timedelta(seconds=100)))

        def execute(self, context: Context, input: None) -> StepDecision:
            return graceful_complete("late")

    class SlowFlow(Flow[None]):
        def __init__(self) -> None:
            self.slow = Slow()

        def get_steps(self) -> StepList[None]:
            return StepList.start_step(self.slow)

    env.client.start_flow(SlowFlow(), "s", None, StartFlowOptions(
        timeout=timedelta(seconds=30), timeout_policy=FlowTimeoutPolicy.FAIL, retry_policy=policy(2)))
    result = env.client.wait_for_flow("s")
    assert result.status is FlowStatus.FAILED and result.error_type is FlowErrorType.FLOW_TIMEOUT
    runs = env.inspect("s")["runs"]
    assert len(runs) == 2
    second = env.inspect("s")["summary"]
    # the second run began 10 s after the first timed out (at 30 s), and got 30 s of its own
    assert second["timeout"] == 30 and second["closeTime"] is not None
    assert round(env.store.get_flow("s").close_time - T0) == 70  # type: ignore[union-attr]


# --- SubFlow ---------------------------------------------------------------------------------


class Parent(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.all_of(SubFlow.run(FLAKY, input, SubFlowOptions(retry_policy=policy(SEEN.get("attempts", 3)))))

    def execute(self, context: Context, input: int) -> StepDecision:
        r = SubFlow.get_condition_results(context, 0)
        SEEN["child"] = (r.status, [c.output for c in r.completions], r.error_message)
        return graceful_complete(r.status.name)


class ParentFlow(Flow[int]):
    def __init__(self) -> None:
        self.parent = Parent()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.parent)


FLAKY = FlakyFlow()


def test_a_subflow_child_with_a_retry_policy_reports_only_its_final_result(env: DexTestEnv) -> None:
    assert env.run(ParentFlow(), 3, flow_id="p").single_output(str) == "COMPLETED"
    assert SEEN["child"] == (FlowStatus.COMPLETED, [30], None)
    child = "SubFlow:p-Parent-1-0"
    assert [r["status"] for r in env.inspect(child)["runs"]] == ["FAILED", "FAILED", "COMPLETED"]
    parent = env.inspect("p")
    assert [e["type"] for e in parent["history"]].count("SubFlowCompleted") == 1


def test_a_subflow_child_that_exhausts_its_retries_reports_the_last_failure(env: DexTestEnv) -> None:
    SEEN["attempts"] = 2
    assert env.run(ParentFlow(), 9, flow_id="p").single_output(str) == "FAILED"
    assert SEEN["child"] == (FlowStatus.FAILED, [], "run 2 failed")


# --- refused ---------------------------------------------------------------------------------


def test_what_dex_cannot_apply_is_refused_before_anything_is_written(env: DexTestEnv) -> None:
    with pytest.raises(ValueError, match="total_duration"):
        env.client.start_flow(FlakyFlow(), "a", 1, StartFlowOptions(
            retry_policy=RetryPolicy(total_duration=timedelta(hours=1))))
    with pytest.raises(ValueError, match="maximum_attempts"):
        env.client.start_flow(FlakyFlow(), "a", 1, StartFlowOptions(retry_policy=RetryPolicy(maximum_attempts=-1)))
    with pytest.raises(ValueError, match="backoff_coefficient"):
        env.client.start_flow(FlakyFlow(), "a", 1, StartFlowOptions(retry_policy=RetryPolicy(backoff_coefficient=0.5)))
    with pytest.raises(ValueError, match="whole seconds"):
        env.client.start_flow(FlakyFlow(), "a", 1, StartFlowOptions(
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1.5))))
    with pytest.raises(TypeError, match="RetryPolicy"):
        env.client.start_flow(FlakyFlow(), "a", 1, StartFlowOptions(retry_policy=3))  # type: ignore[arg-type]
    assert env.store.get_flow("a") is None


def test_an_indexed_initial_attribute_with_a_retry_policy_is_refused(env: DexTestEnv) -> None:
    from dexcli.sdk.attributes import AttributeIndex, IndexType

    indexed = Attribute("label", str, index=AttributeIndex(IndexType.KEYWORD))

    class Labeled(FlakyFlow):
        def get_persistence_schema(self) -> PersistenceSchema:
            return PersistenceSchema.of(TRIES, indexed)

    with pytest.raises(NotSupportedYetError, match="label"):
        env.client.start_flow(Labeled(), "a", 1, StartFlowOptions(retry_policy=policy()).with_attribute(indexed, "x"))
    assert env.store.get_flow("a") is None


def test_a_cancel_during_the_backoff_ends_the_retries(env: DexTestEnv) -> None:
    env.client.start_flow(FlakyFlow(), "f", 9, StartFlowOptions(retry_policy=policy(5, initial=3600, maximum=7200)))
    env.drive(["f"], until=lambda: len(SEEN.get("times", ())) == 1 and env.store.get_flow("f") is not None
              and env.inspect("f")["summary"]["flowRetry"]["attempt"] == 2)
    assert env.store.get_flow("f").is_running  # type: ignore[union-attr]  # run 2, its start step due in an hour
    env.client.stop_flow("f", StopFlowOptions(StopType.CANCEL))
    assert env.client.wait_for_flow("f").status is FlowStatus.CANCELED
    assert len(SEEN["times"]) == 1  # run 2 never ran
    assert [r["status"] for r in env.inspect("f")["runs"]] == ["FAILED", "CANCELED"]
