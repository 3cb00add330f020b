"""The official SDK's definition rules, applied by dexcli's Registry, without
the official SDK installed: tests/parity checks the same cases against it.

Return annotations, generator annotations, input types with a codec, async only when allowed,
wait_for and handle_timeout signatures; steps addressed by class (an instance fails the flow
at once); the signatures of go_to, StepMovement and retry_after.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Optional

import pydantic
import pytest

from dexcli import (
    Context,
    Flow,
    FlowDefinitionError,
    FlowErrorType,
    FlowStatus,
    Registry,
    RetryAfterError,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    StepOutput,
    Wait,
    go_to,
    graceful_complete,
    heartbeat,
    retry_after,
)
from dexcli.sdk.errors import FlowCodeError
from tests.engine.engine_helpers import attempts


class One(Flow[Any]):
    def __init__(self, *steps: Step[Any]) -> None:
        self.steps = steps

    def get_steps(self) -> StepList[Any]:
        return StepList.start_step(self.steps[0]).other_steps(*self.steps[1:])


def problems(*steps: Step[Any], **registry: Any) -> list[str]:
    with pytest.raises(FlowDefinitionError) as info:
        Registry([One(*steps)], **registry)
    return info.value.problems


class Ok(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


# --- annotations ---------------------------------------------------------------------------------


class NoReturn(Step[int]):
    def execute(self, context: Context, n: int):  # type: ignore[no-untyped-def]
        return graceful_complete(n)


class IteratorGen(Step[int]):
    def execute(self, context: Context, n: int) -> Iterator[StepOutput]:
        yield heartbeat(n)


class GoodGen(Step[int]):
    def execute(self, context: Context, n: int) -> Generator[StepOutput, None, StepDecision]:
        yield heartbeat(n)
        return graceful_complete(n)


def test_execute_must_return_step_decision() -> None:
    assert problems(NoReturn()) == [
        "flow One, step NoReturn: execute must return StepDecision (annotate it `-> StepDecision`)"]


def test_a_generator_must_be_annotated_generator_of_step_output_none_step_decision() -> None:
    assert problems(IteratorGen()) == [
        "flow One, step IteratorGen: execute generator must return Generator[StepOutput, None, StepDecision]"]
    Registry([One(GoodGen())])


class Later(Step[int]):
    def execute(self, context: Context, n: Later2) -> StepDecision:  # noqa: F821 - the name never resolves
        return graceful_complete(n)


def test_annotations_that_do_not_resolve_are_refused() -> None:
    [problem] = problems(Later())
    assert problem.startswith("flow One, step Later: execute's annotations cannot be resolved (NameError: ")
    assert "Later2" in problem


# --- input types: the official SDK's codecs ---------------------------------------------------


@dataclass(frozen=True)
class Point:
    x: int


class Model(pydantic.BaseModel):
    x: int


def taking(tp: Any) -> Step[Any]:
    class Takes(Step[Any]):
        def execute(self, context: Context, value: Any) -> StepDecision:
            return graceful_complete(None)

    Takes.execute.__annotations__["value"] = tp  # this module's annotations are strings
    return Takes()


@pytest.mark.parametrize("tp, name", [
    (dict, "dict"), (Any, "Any"), (Optional[str], "Optional"), (str | None, "str | None"),  # noqa: UP045
    (object, "object"), (Model, "Model"), (set[int], "set"), (list, "list"),
])
def test_an_input_type_without_an_official_codec_is_refused(tp: Any, name: str) -> None:
    [problem] = problems(taking(tp))
    assert problem.startswith(f"flow One, step Takes: no codec for {name}; register one in CodecRegistry")


@pytest.mark.parametrize("tp", [str, int, float, bool, bytes, type(None), Point, FlowStatus, list[int],
                                dict[str, Point], tuple[int, ...], list[Any]])
def test_an_input_type_with_an_official_codec_registers(tp: Any) -> None:
    Registry([One(taking(tp))])


# --- wait_for and handle_timeout ---------------------------------------------------------------


class WaitsOnStr(Ok):
    def wait_for(self, context: Context, n: str) -> Wait:  # type: ignore[override]
        return Wait.skip_immediately()


class WaitsBadly(Ok):
    def wait_for(self, context: Context, n: int) -> None:  # type: ignore[override]
        return None


def test_wait_for_takes_the_same_input_and_returns_wait() -> None:
    assert problems(WaitsOnStr()) == ["flow One, step WaitsOnStr: execute and wait_for must use the same input "
                                      "type (int and str)"]
    assert problems(WaitsBadly()) == ["flow One, step WaitsBadly: wait_for must return Wait (annotate it `-> Wait`)"]


class TimesOut(One):
    def handle_timeout(self, context: Context) -> StepDecision:
        return graceful_complete("timed out")


class TimesOutBadly(One):
    def handle_timeout(self, context: Context, extra: int) -> StepDecision:  # type: ignore[override]
        return graceful_complete("timed out")


def test_handle_timeout_takes_only_the_context() -> None:
    Registry([TimesOut(Ok())])
    with pytest.raises(FlowDefinitionError) as info:
        Registry([TimesOutBadly(Ok())])
    assert info.value.problems == ["flow TimesOutBadly: handle_timeout must accept only the context: "
                                   "(self, context), got 3 parameters"]


class Nameless(Ok):
    def get_step_type(self) -> str:
        return " "


def test_a_step_type_must_not_be_blank() -> None:
    assert problems(Nameless()) == [
        "flow One, step class Nameless: get_step_type() is empty (durable name is required)"]


# --- steps are addressed by class --------------------------------------------------------------


class Second(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class First(Step[int]):
    def __init__(self, second: Second) -> None:
        self.second = second

    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(self.second, n)  # type: ignore[arg-type]


class InstanceFlow(Flow[int]):
    def __init__(self) -> None:
        self.second = Second()
        self.first = First(self.second)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.first).other_steps(self.second)


def test_go_to_a_step_instance_registers_and_fails_the_flow_at_once(env: Any) -> None:
    Registry([InstanceFlow()])  # as the official Registry: nothing to see before the decision
    result = env.run(InstanceFlow(), 1, "f")
    assert result.status is FlowStatus.FAILED and result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE
    [attempt] = attempts(env, "f", "First-1")
    assert attempt["errorType"] == "dexcli.sdk.errors.FlowCodeError"
    assert "takes a Step class, not an instance: Second" in attempt["detail"]


def test_movements_and_cancellations_take_step_classes() -> None:
    for call in (lambda: go_to(Second(), 1), lambda: StepMovement.of("Second", 1),  # type: ignore[arg-type]
                 lambda: go_to(Second, 1).with_canceling_steps(Second())):  # type: ignore[arg-type]
        with pytest.raises(FlowCodeError, match="takes a Step class"):
            call()


def test_go_to_and_step_movement_take_an_input_and_options_only_on_a_movement() -> None:
    with pytest.raises(TypeError):
        go_to(Second)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        go_to(Second, 1, options=StepOptions())  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        StepMovement.of(Second)  # type: ignore[call-arg]
    movement = StepMovement.of(Second, 1, options=StepOptions(heartbeat_timeout=timedelta(seconds=30)))
    assert movement.options is not None and go_to(Second, 1).movements == (StepMovement(Second, 1),)


def test_cancellation_selectors_are_a_union_and_flow_wide_wins() -> None:
    decision = go_to(Second, 1).with_canceling_sibling_steps(Second, First).with_canceling_steps(First, First)
    assert (decision.canceling_steps, decision.canceling_sibling_steps) == ((First,), (Second,))
    assert decision.with_canceling_sibling_steps(First).canceling_sibling_steps == (Second,)


def test_the_failure_route_is_private_as_in_the_official_sdk() -> None:
    routed = StepOptions().on_execute_failure_proceed_to(Second, StepOptions(heartbeat_timeout=timedelta(seconds=20)))
    assert routed.execute_failure_step is Second and routed.execute_failure_step_options is not None
    assert "execute_failure_step" not in StepOptions.__dataclass_fields__


# --- retry_after ----------------------------------------------------------------------------------


def test_retry_after_takes_positive_seconds_and_a_cause() -> None:
    cause = KeyError("k")
    error = retry_after(30, cause)
    assert isinstance(error, RetryAfterError) and (error.after_seconds, error.cause) == (30, cause)
    with pytest.raises(TypeError):
        retry_after(30)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="not timedelta"):
        retry_after(timedelta(seconds=30), cause)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cause is required"):
        retry_after(30, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must be positive"):
        retry_after(0, cause)
