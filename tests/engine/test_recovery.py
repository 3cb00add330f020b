"""execute failure recovery (on_execute_failure_proceed_to) and WORKER_API_FAILED."""

import asyncio
from dataclasses import dataclass
from typing import Any

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    RecoveryErrorInfo,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    graceful_complete,
)
from tests.engine.engine_flows import Flaky, Single, opts
from tests.engine.engine_helpers import attempts, history, step


@dataclass(frozen=True)
class Order:
    order_id: str
    qty: int


class Outer:
    class Inner(Exception):
        pass


class Fails(Step[Order]):
    def __init__(self, error: Any = None, attempts: int = 2) -> None:
        self.error = error or (lambda o: LookupError(f"order {o.order_id} not found"))
        self.attempts = attempts

    def get_step_options(self) -> StepOptions:
        return opts(attempts=self.attempts).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: Order) -> StepDecision:
        raise self.error(input)


class Recover(Step[Order]):
    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def execute(self, context: Context, input: Order) -> StepDecision:
        self.seen.update(input=input, recovery_error=context.recovery_error,
                         from_id=context.from_step_execution_id, seid=context.step_execution_id,
                         attempt=context.attempt)
        return graceful_complete(f"recovered {input.order_id}")


class OrderFlow(Flow[Order]):
    def __init__(self, first: Step[Any], recover: Recover) -> None:
        self.first, self.recover = first, recover

    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(self.first).other_steps(self.recover)


def test_exhausted_retries_move_to_the_recovery_step_with_the_same_input(env):
    rec = Recover()
    result = env.run(OrderFlow(Fails(), rec), Order("o-7", 3), "f")
    assert result.status is FlowStatus.COMPLETED
    assert result.single_output(str) == "recovered o-7"
    assert rec.seen["input"] == Order("o-7", 3)
    assert rec.seen["recovery_error"] == RecoveryErrorInfo(detail="order o-7 not found",
                                                           error_type="builtins.LookupError")
    assert rec.seen["from_id"] == "Fails-1" and rec.seen["seid"] == "Recover-1" and rec.seen["attempt"] == 1
    assert len(attempts(env, "f", "Fails-1")) == 2
    r = step(env, "f", "Recover-1")
    assert r["fromStepExecutionId"] == "Fails-1"
    assert r["recoveryError"] == {"errorType": "builtins.LookupError", "detail": "order o-7 not found"}
    [failed] = [e for e in history(env, "f") if e["type"] == "StepExecuteFailed"]
    assert (failed["stepExecutionId"], failed["attempt"], failed["recoveryStepExecutionId"]) == (
        "Fails-1", 2, "Recover-1")


def test_recovery_error_type_is_module_and_qualname(env):
    rec = Recover()
    env.run(OrderFlow(Fails(lambda o: Outer.Inner("deep"), attempts=1), rec), Order("o", 1), "f")
    assert rec.seen["recovery_error"].error_type == f"{__name__}.Outer.Inner"
    assert rec.seen["recovery_error"].detail == "deep"


def test_a_long_detail_is_truncated_to_1_kib(env):
    rec = Recover()
    env.run(OrderFlow(Fails(lambda o: ValueError("x" * 5000), attempts=1), rec), Order("o", 1), "f")
    assert rec.seen["recovery_error"].detail == "x" * 1024


class Hangs(Step[Order]):
    def get_step_options(self) -> StepOptions:
        return opts(attempts=1, heartbeat=10).on_execute_failure_proceed_to(Recover)

    async def execute(self, context: AsyncContext, input: Order) -> StepDecision:
        await asyncio.sleep(3600)
        return graceful_complete("never")


def test_a_timeout_routes_with_its_timeout_type(env):
    rec = Recover()
    result = env.run(OrderFlow(Hangs(), rec), Order("o", 1), "f")
    assert result.single_output(str) == "recovered o"
    assert rec.seen["recovery_error"] == RecoveryErrorInfo(detail="activity Heartbeat timeout", error_type="Heartbeat")


def test_without_a_route_the_flow_fails_with_worker_api_failed(env):
    result = env.run(Single(Flaky(opts(attempts=2), fail_always=True)), 0, "f")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert result.error_message == "attempt 2 fails"  # the worker's detail, as a Dex server reports it
    assert result.completions == ()
    types = [e["type"] for e in history(env, "f")]
    assert types == ["FlowStarted", "StepExecuteFailed", "FlowClosed"]
    closed = history(env, "f")[-1]
    assert (closed["flowStatus"], closed["errorType"]) == ("FAILED", "WORKER_API_FAILED")


def test_recovery_error_is_none_outside_a_recovery_path(env):
    f = Flaky(None, fail_attempts=(1,))
    env.run(Single(f), 0, "f")
    assert [s["recovery_error"] for s in f.seen] == [None, None]


def test_the_recovery_step_fails_the_flow_when_it_fails_itself(env):
    # the recovery step has its own options; failing there has no further route
    rec = Flaky(opts(attempts=1), fail_always=True)

    class Start(Step[int]):
        def get_step_options(self) -> StepOptions:
            return opts(attempts=1).on_execute_failure_proceed_to(Flaky)

        def execute(self, context: Context, input: int) -> StepDecision:
            raise KeyError("first")

    result = env.run(Single(Start(), rec), 0, "f")
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert rec.seen[0]["recovery_error"] == RecoveryErrorInfo(detail="'first'", error_type="builtins.KeyError")
    assert [e["stepExecutionId"] for e in history(env, "f") if e["type"] == "StepExecuteFailed"] == [
        "Start-1", "Flaky-1"]
