"""Start options with Dex's semantics, in virtual time: the flow timeout (FAIL, CANCEL,
HANDLER and Flow.handle_timeout), start_delay, every IdReusePolicy, and the checks the
official SDK makes before anything starts."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from datetime import timedelta

import pytest

from dexcli import (
    AsyncClient,
    Context,
    FlowAlreadyStartedError,
    FlowErrorType,
    FlowStatus,
    FlowTimeoutHandlerOptions,
    FlowTimeoutPolicy,
    IdReusePolicy,
    RetryPolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    StepOutput,
    force_fail,
    go_to,
    graceful_complete,
    heartbeat,
)
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.store import Store
from dexcli.testing import DexTestEnv
from tests.engine.engine_flows import Beat, Flaky, Single, opts
from tests.engine.engine_helpers import history, history_types, rel, step, step_ids

FIVE_MINUTES = Beat(opts(heartbeat=30), every=10, finish_after=300)


def slow() -> Single:
    return Single(Beat(opts(heartbeat=30), every=10, finish_after=300))


class Cleanup(Step[str]):
    def execute(self, context: Context, reason: str) -> StepDecision:
        return graceful_complete(f"cleaned up: {reason}")


class Recovered(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete(f"recovered from {context.recovery_error.error_type}")  # type: ignore[union-attr]


class WithHandler(Single):
    """A five-minute flow whose handle_timeout moves to Cleanup (or fails, or raises)."""

    def __init__(self, mode: str = "go_to") -> None:
        super().__init__(Beat(opts(heartbeat=30), every=10, finish_after=300), Cleanup(), Recovered())
        self.mode = mode
        self.calls: list[tuple[str, int]] = []

    def handle_timeout(self, context: Context) -> StepDecision:
        self.calls.append((context.step_execution_id, context.attempt))
        if self.mode == "raise":
            raise RuntimeError("the handler broke")
        if self.mode == "fail":
            return force_fail("gave up at the timeout")
        return go_to(Cleanup, "timed out")


class GeneratorHandler(Single):
    def __init__(self) -> None:
        super().__init__(Beat(opts(heartbeat=30), every=10, finish_after=300))

    def handle_timeout(self, context: Context) -> Generator[StepOutput, None, StepDecision]:
        yield heartbeat("handling")
        return graceful_complete("handled by a generator")


class Echo(Step[int]):
    """Completes with its input; fails (no retries) when the input is negative."""

    def get_step_options(self):  # type: ignore[no-untyped-def]
        return opts(attempts=1)

    def execute(self, context: Context, n: int) -> StepDecision:
        if n < 0:
            raise RuntimeError("negative")
        return graceful_complete(n)


class Quick(Single):
    def __init__(self) -> None:
        super().__init__(Echo())


def t(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


# --- flow timeout ----------------------------------------------------------------------------

def test_a_timeout_without_a_handler_fails_the_flow_with_flow_timeout_and_cancels_its_steps(env: DexTestEnv) -> None:
    env.client.start_flow(slow(), "f", 1, StartFlowOptions(timeout=t(60)))
    result = env.client.wait_for_flow("f")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.FLOW_TIMEOUT
    assert result.error_message == "Flow timed out after 60 seconds"
    snap = env.inspect("f")
    assert rel(env, snap["summary"]["closeTime"]) == 60
    assert snap["steps"][0]["status"] == "CANCELED"
    assert snap["steps"][0]["attempts"][0]["outcome"] == "CANCELED"
    summary = snap["summary"]
    assert (summary["timeout"], summary["timeoutPolicy"], summary["timeoutFired"]) == (60, "FAIL", True)
    assert history_types(env, "f")[-2:] == ["FlowTimedOut", "FlowClosed"]


def test_the_cancel_policy_ends_the_flow_canceled(env: DexTestEnv) -> None:
    env.client.start_flow(slow(), "f", 1, StartFlowOptions(timeout=t(60), timeout_policy=FlowTimeoutPolicy.CANCEL))
    result = env.client.wait_for_flow("f")
    assert (result.status, result.error_type) == (FlowStatus.CANCELED, None)
    assert result.error_message is None  # the server gives a canceled run no message; inspect has it
    assert env.inspect("f")["summary"]["errorMessage"] == "Flow timed out after 60 seconds"
    assert rel(env, env.inspect("f")["summary"]["closeTime"]) == 60


def test_a_flow_that_ends_before_its_timeout_is_not_touched_by_it(env: DexTestEnv) -> None:
    env.client.start_flow(slow(), "f", 1, StartFlowOptions(timeout=t(3600)))
    result = env.client.wait_for_flow("f")
    assert result.status is FlowStatus.COMPLETED
    assert rel(env, env.inspect("f")["summary"]["closeTime"]) == 300
    assert "FlowTimedOut" not in history_types(env, "f")
    assert env.inspect("f")["summary"]["timeoutFired"] is False


def test_an_overridden_handle_timeout_runs_as_a_step_and_its_decision_applies(env: DexTestEnv) -> None:
    flow = WithHandler()
    env.client.start_flow(flow, "f", 1, StartFlowOptions(timeout=t(60)))  # DEFAULT -> HANDLER
    result = env.client.wait_for_flow("f")
    assert result.status is FlowStatus.COMPLETED
    assert flow.calls == [("sys:timeout_handler-1", 1)]
    assert step_ids(env, "f") == ["Beat-1", "sys:timeout_handler-1", "Cleanup-1"]
    handler = step(env, "f", "sys:timeout_handler-1")
    assert handler["fromStepExecutionId"] == "__timeout__" and rel(env, handler["scheduledTime"]) == 60
    # the other steps go on under HANDLER: the flow closes once Beat finishes too, at 300 s
    assert step(env, "f", "Beat-1")["status"] == "COMPLETED"
    assert [c.decode() for c in result.completions] == ["cleaned up: timed out", "done after 30 beats"]
    assert env.inspect("f")["summary"]["timeoutPolicy"] == "HANDLER"


def test_a_handler_decision_to_fail_fails_the_flow_and_a_generator_handler_runs(env: DexTestEnv) -> None:
    env.client.start_flow(WithHandler("fail"), "f", 1, StartFlowOptions(timeout=t(60)))
    result = env.client.wait_for_flow("f")
    assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.STEP_DECISION_FAILED)
    assert result.error_message == "gave up at the timeout"
    assert rel(env, env.inspect("f")["summary"]["closeTime"]) == 60
    env.client.start_flow(GeneratorHandler(), "g", 1, StartFlowOptions(timeout=t(60)))
    assert env.client.wait_for_flow("g").completions[0].decode() == "handled by a generator"


def test_handler_options_retry_the_handler_then_route_its_failure(env: DexTestEnv) -> None:
    flow = WithHandler("raise")
    handler_opts = FlowTimeoutHandlerOptions(retry=RetryPolicy(maximum_attempts=2)).on_failure_proceed_to(Recovered)
    env.client.start_flow(flow, "f", 1, StartFlowOptions(timeout=t(60), timeout_handler_options=handler_opts))
    result = env.client.wait_for_flow("f")
    assert [a for _, a in flow.calls] == [1, 2]
    assert "recovered from builtins.RuntimeError" in [c.decode() for c in result.completions]


def test_a_policy_can_override_the_handler_and_fail_instead(env: DexTestEnv) -> None:
    flow = WithHandler()
    env.client.start_flow(flow, "f", 1, StartFlowOptions(timeout=t(60), timeout_policy=FlowTimeoutPolicy.FAIL))
    assert env.client.wait_for_flow("f").error_type is FlowErrorType.FLOW_TIMEOUT
    assert flow.calls == []


def test_the_timeout_is_durable_and_fires_after_a_restart(tmp_path) -> None:
    path = tmp_path / "dex.db"
    with DexTestEnv(path) as first:
        first.client.start_flow(slow(), "f", 1, StartFlowOptions(timeout=t(60)))
        first.drive(until=lambda: first.clock.now() - first.store.get_flow("f").start_time >= 30)  # type: ignore[union-attr]
        assert first.result("f").status is FlowStatus.RUNNING
        start = first.store.get_flow("f").start_time  # type: ignore[union-attr]
    with DexTestEnv(path, start=start + 40) as second:  # another process, later: the step is lost
        second.engine.definitions.registry.add(slow())
        result = second.client.wait_for_flow("f")
        assert result.error_type is FlowErrorType.FLOW_TIMEOUT
        assert second.store.get_flow("f").close_time == start + 60  # type: ignore[union-attr]


@pytest.mark.parametrize("options,error", [
    (StartFlowOptions(timeout_policy=FlowTimeoutPolicy.FAIL), "requires a positive timeout"),
    (StartFlowOptions(timeout=t(60), timeout_policy=FlowTimeoutPolicy.HANDLER), "has no handle_timeout override"),
    (StartFlowOptions(timeout=t(1.5)), "whole seconds"),
    (StartFlowOptions(start_delay=t(-1)), "whole seconds"),
    (StartFlowOptions(timeout=t(60), timeout_handler_options=FlowTimeoutHandlerOptions()),
     "require a positive timeout with HANDLER policy"),
])
def test_start_options_the_official_sdk_refuses_start_nothing(env: DexTestEnv, options: StartFlowOptions,
                                                              error: str) -> None:
    with pytest.raises(ValueError, match=error):
        env.client.start_flow(slow(), "f", 1, options)
    assert env.store.get_flow("f") is None


def test_handler_options_dex_does_not_apply_are_refused_loudly(env: DexTestEnv) -> None:
    options = StartFlowOptions(timeout=t(60), timeout_handler_options=FlowTimeoutHandlerOptions(
        load_channels=("x",)))
    with pytest.raises(NotSupportedYetError, match="load_channels"):
        env.client.start_flow(WithHandler(), "f", 1, options)
    assert env.store.get_flow("f") is None


# --- start delay -----------------------------------------------------------------------------

def test_a_start_delay_queues_the_start_step_until_it_passes(env: DexTestEnv) -> None:
    flow = Single(Flaky())
    env.client.start_flow(flow, "f", 1, StartFlowOptions(start_delay=timedelta(hours=1)))
    snap = env.inspect("f")
    assert snap["summary"]["flowStatus"] == "RUNNING" and snap["summary"]["startDelay"] == 3600
    assert snap["steps"][0]["status"] == "QUEUED" and snap["steps"][0]["secondsToNextAttempt"] == 3600
    started = history(env, "f")[0]
    assert started["startDelay"] == 3600 and rel(env, started["startStepEligibleTime"]) == 3600
    result = env.client.wait_for_flow("f")
    assert result.single_output(int) == 1
    assert rel(env, step(env, "f", "Flaky-1")["firstAttemptTime"]) == 3600


def test_a_start_delay_does_not_count_toward_the_flow_timeout(env: DexTestEnv) -> None:
    # as on a Dex server: the timeout counts from the end of the delay
    env.client.start_flow(Single(Flaky()), "f", 1, StartFlowOptions(start_delay=t(120), timeout=t(60)))
    result = env.client.wait_for_flow("f")
    assert result.single_output(int) == 1
    assert rel(env, step(env, "f", "Flaky-1")["firstAttemptTime"]) == 120


def test_an_async_start_with_a_delay_is_not_leased_at_once_by_a_running_worker(env: DexTestEnv) -> None:
    from dexcli.engine.clock import run as run_on_clock

    client = AsyncClient(engine=env.engine)

    async def go() -> None:
        worker = asyncio.ensure_future(env.engine.drive_async(None, until_idle=False, until=lambda: bool(
            env.store.get_flow("f") and env.result("f").is_terminal), poll=1, release=False))
        await asyncio.sleep(0)
        await client.start_flow(Single(Flaky()), "f", 1, StartFlowOptions(start_delay=t(30)))
        assert env.inspect("f")["steps"][0]["status"] == "QUEUED"
        await worker

    run_on_clock(go, env.clock)
    assert rel(env, step(env, "f", "Flaky-1")["firstAttemptTime"]) == 30


# --- id reuse --------------------------------------------------------------------------------

def _ended(env: DexTestEnv, fail: bool) -> str:
    """Run flow `f` to its end (FAILED when `fail`); returns its run id."""
    run_id = env.client.start_flow(Quick(), "f", -1 if fail else 1)
    env.client.wait_for_flow("f")
    return run_id


@pytest.mark.parametrize("policy,after_completed,after_failed", [
    (IdReusePolicy.DEFAULT, False, False),
    (IdReusePolicy.DISALLOW, False, False),
    (IdReusePolicy.ALLOW_IF_PREVIOUS_FAILED, False, True),
    (IdReusePolicy.ALLOW_IF_NOT_RUNNING, True, True),
    (IdReusePolicy.ALLOW_TERMINATE_IF_RUNNING, True, True),
])
def test_reusing_the_id_of_a_closed_run(tmp_path, policy: IdReusePolicy, after_completed: bool,
                                        after_failed: bool) -> None:
    for fail, allowed in ((False, after_completed), (True, after_failed)):
        with DexTestEnv(tmp_path / f"{policy.name}-{fail}.db") as env:
            old_run = _ended(env, fail)
            options = StartFlowOptions(id_reuse_policy=policy)
            if not allowed:
                with pytest.raises(FlowAlreadyStartedError):
                    env.client.start_flow(Quick(), "f", 1, options)
                assert env.store.get_flow("f").run_id == old_run  # type: ignore[union-attr]
                continue
            new_run = env.client.start_flow(Quick(), "f", 2, options)
            assert new_run != old_run
            assert env.client.wait_for_flow("f").status is FlowStatus.COMPLETED
            archived = env.inspect(f"f${old_run}")
            assert archived["summary"]["runId"] == old_run and archived["steps"][0]["input"] == (-1 if fail else 1)
            assert env.inspect("f")["steps"][0]["input"] == 2
            assert history(env, "f")[0]["previousRunId"] == old_run


@pytest.mark.parametrize("policy", [IdReusePolicy.DEFAULT, IdReusePolicy.ALLOW_IF_NOT_RUNNING,
                                    IdReusePolicy.ALLOW_IF_PREVIOUS_FAILED, IdReusePolicy.DISALLOW])
def test_a_running_run_keeps_its_id_unless_the_policy_terminates_it(env: DexTestEnv, policy: IdReusePolicy) -> None:
    env.client.start_flow(slow(), "f", 1)
    with pytest.raises(FlowAlreadyStartedError):
        env.client.start_flow(slow(), "f", 1, StartFlowOptions(id_reuse_policy=policy))


def test_allow_terminate_if_running_terminates_the_running_run_and_starts_a_new_one(env: DexTestEnv) -> None:
    old_run = env.client.start_flow(slow(), "f", 1)
    env.drive(until=lambda: env.clock.now() - env.t0 >= 20)
    new_run = env.client.start_flow(Quick(), "f", 7,
                                    StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_TERMINATE_IF_RUNNING))
    old = env.inspect(f"f${old_run}")
    assert old["summary"]["flowStatus"] == "TERMINATED" and old["steps"][0]["status"] == "CANCELED"
    assert new_run in old["summary"]["errorMessage"]
    assert env.client.wait_for_flow("f").single_output(int) == 7
    assert env.inspect("f")["summary"]["idReusePolicy"] == "ALLOW_TERMINATE_IF_RUNNING"


def test_a_refused_reuse_with_the_same_request_id_returns_the_existing_run(env: DexTestEnv) -> None:
    first = env.client.start_flow(slow(), "f", 1, StartFlowOptions(request_id="r1"))
    again = StartFlowOptions(request_id="r1", ignore_already_started=True, id_reuse_policy=IdReusePolicy.DISALLOW)
    assert env.client.start_flow(slow(), "f", 1, again) == first
    # a policy that permits another run starts one, even with the same request id
    _ = env.client.wait_for_flow("f")
    reuse = StartFlowOptions(request_id="r1", ignore_already_started=True,
                             id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING)
    assert env.client.start_flow(slow(), "f", 1, reuse) != first


def test_archived_runs_are_not_driven_and_keep_their_store_rows(env: DexTestEnv) -> None:
    old_run = _ended(env, True)
    env.client.start_flow(Quick(), "f", 2, StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING))
    store: Store = env.store
    assert store.running_flow_ids() == ["f"]
    assert {a.flow_id for a in store.attempts_of(f"f${old_run}")} == {f"f${old_run}"}
    assert store.attempts_of("f") == []
