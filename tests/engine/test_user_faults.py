"""Faults in user code say where they happened and what is wrong (issue 14 item 5, issue 11).

Each failed attempt records the user code's traceback, innermost frame first, without dex's
frames; a sync step calling `context.heartbeat` and any call of an SDK API dex lacks fail the
flow at once with INVALID_USER_FLOW_CODE instead of retrying an AttributeError for hours.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    FlowErrorType,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    graceful_complete,
    retry_after,
)
from dexcli.engine.user_code import SDK_NAMES, innermost_place
from dexcli.testing import DexTestEnv
from tests.engine.engine_helpers import attempts, history

TWO_TRIES = StepOptions(execute_retry=RetryPolicy(maximum_attempts=2))
NOTES = Stream("Notes", str, 1 << 20)


def _line_of(fragment: str) -> int:
    """The line of this file that holds `fragment` (so the tests do not hard-code numbers)."""
    with open(__file__, encoding="utf-8") as f:
        return next(i for i, line in enumerate(f, 1) if fragment in line and "_line_of" not in line)


def parse_order(text: str) -> int:
    return int(text)  # the innermost user frame


class Raises(Step[str]):
    def get_step_options(self) -> StepOptions:
        return TWO_TRIES

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(parse_order(input))  # the frame that called it


class OneStepFlow(Flow[Any]):
    def __init__(self, step: Step[Any]) -> None:
        self.step = step

    def get_steps(self) -> StepList[Any]:
        return StepList.start_step(self.step)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NOTES)


def OneStep(step: Step[Any]) -> Flow[Any]:  # noqa: N802 - reads as a flow class
    """A flow of one step, its flow type named after the step (dex registers a flow per class)."""
    flow_class = type(f"{type(step).__name__}Flow", (OneStepFlow,), {})
    return flow_class(step)  # type: ignore[no-any-return]


def test_a_failed_attempt_records_the_user_traceback_innermost_frame_first(env: DexTestEnv) -> None:
    result = env.run(OneStep(Raises()), "not a number", "f")
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    tries = attempts(env, "f", "Raises-1")
    assert len(tries) == 2
    stack = tries[0]["stackTrace"]
    assert stack == tries[1]["stackTrace"]
    files = [line for line in stack.splitlines() if line.startswith("  File ")]
    assert files == [
        f'  File "{__file__}", line {_line_of("return int(text)")}, in parse_order',
        f'  File "{__file__}", line {_line_of("graceful_complete(parse_order(input))")}, in execute',
    ]  # innermost first; neither dex's frames nor the asyncio/thread machinery around the handler
    assert "return int(text)" in stack and "dexcli" not in stack
    assert innermost_place(stack) == f"{__file__}:{_line_of('return int(text)')}"
    [failed] = [e for e in history(env, "f") if e["type"] == "StepExecuteFailed"]
    assert failed["stackTrace"] == stack


class Decodes(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(json.loads(input))  # raises inside the standard library


def test_the_place_of_a_failure_in_the_standard_library_is_the_users_line(env: DexTestEnv) -> None:
    env.start(OneStep(Decodes()), "{", "f")
    env.drive(["f"], until=lambda: len(attempts(env, "f", "Decodes-1")) >= 2)
    stack = attempts(env, "f", "Decodes-1")[0]["stackTrace"]
    assert stack.splitlines()[0].startswith(f'  File "{json.__file__.rsplit("/", 1)[0]}/')  # innermost: json's
    assert innermost_place(stack) == f"{__file__}:{_line_of('graceful_complete(json.loads(input))')}"


class Retries(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        if context.attempt == 1:
            try:
                parse_order("x")
            except ValueError as exc:
                raise retry_after(5, exc) from exc
        return graceful_complete(input)


def test_retry_after_records_the_traceback_of_its_cause(env: DexTestEnv) -> None:
    env.run(OneStep(Retries()), 1, "f")
    first = attempts(env, "f", "Retries-1")[0]
    assert first["errorType"] == "builtins.ValueError"
    assert innermost_place(first["stackTrace"]) == f"{__file__}:{_line_of('return int(text)')}"


class Refused(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return input  # type: ignore[return-value]  # not a decision: dex refuses it, no user frame


def test_a_failure_without_a_user_frame_records_no_traceback(env: DexTestEnv) -> None:
    env.start(OneStep(Refused()), 1, "f")
    env.drive(["f"], until=lambda: len(attempts(env, "f", "Refused-1")) >= 2)
    first = attempts(env, "f", "Refused-1")[0]
    assert first["errorType"] == "dexcli.sdk.errors.InvalidStepResultError"
    assert first["stackTrace"] is None


class SyncHeartbeat(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        context.heartbeat(input)  # type: ignore[attr-defined]
        return graceful_complete(input)


def test_a_sync_step_calling_context_heartbeat_fails_at_once_with_the_fix(env: DexTestEnv) -> None:
    result = env.run(OneStep(SyncHeartbeat()), 1, "f")
    assert result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE
    assert "sync steps heartbeat with `yield heartbeat(value)` (or make the step async)" in (result.error_message or "")
    [only] = attempts(env, "f", "SyncHeartbeat-1")  # not retried
    assert only["errorType"] == "builtins.AttributeError"
    assert innermost_place(only["stackTrace"]) == f"{__file__}:{_line_of('context.heartbeat(input)  #')}"


class FutureApi(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        context.some_future_api()  # type: ignore[attr-defined]
        return graceful_complete(input)


class NotInSdk(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        context.no_such_api()  # type: ignore[attr-defined]
        return graceful_complete(input)


def test_an_sdk_method_dex_lacks_fails_the_flow_at_once_naming_it(env: DexTestEnv,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # dex implements every name of the SDK types it lists today: one it would lack, as listed
    monkeypatch.setitem(SDK_NAMES, "Context", SDK_NAMES["Context"] | {"some_future_api"})
    cases = {FutureApi: "dex does not implement Context.some_future_api yet",
             NotInSdk: "Context has no attribute no_such_api"}
    for step, message in cases.items():
        name = step.__name__
        result = env.run(OneStep(step()), 1, name)
        assert result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE, name
        assert result.error_message == f"{name}-1: {message}"
        assert len(attempts(env, name, f"{name}-1")) == 1  # not retried


class AsyncMissing(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        context.no_such_api()  # type: ignore[attr-defined]
        return graceful_complete(input)


def test_an_async_context_is_named_as_such(env: DexTestEnv) -> None:
    result = env.run(OneStep(AsyncMissing()), 1, "f")
    assert result.error_message == "AsyncMissing-1: AsyncContext has no attribute no_such_api"


class Order:
    pass


class OwnAttribute(Step[int]):
    def get_step_options(self) -> StepOptions:
        return TWO_TRIES

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(Order().total)  # type: ignore[attr-defined]  # the user's own object


def test_an_attribute_error_on_the_users_own_object_is_retried_as_before(env: DexTestEnv) -> None:
    result = env.run(OneStep(OwnAttribute()), 1, "f")
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert len(attempts(env, "f", "OwnAttribute-1")) == 2
