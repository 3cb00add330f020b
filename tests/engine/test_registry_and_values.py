"""Registration errors (flow + step + problem) and value encoding (JSON through pydantic, for the
types the official SDK has codecs for: tests/engine/test_registration_rules.py)."""

import enum
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    FlowDefinitionError,
    FlowStatus,
    Registry,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    ValueMappingError,
    Wait,
    go_to,
    graceful_complete,
)

# --- registry validation ----------------------------------------------------------------------


class Ok(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class OkStr(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class Steps(Flow[int]):
    def __init__(self, step_list: StepList) -> None:
        self.step_list = step_list

    def get_flow_type(self) -> str:
        return "BadFlow"

    def get_steps(self) -> StepList[int]:
        return self.step_list


def problems_of(step_list: StepList) -> str:
    with pytest.raises(FlowDefinitionError) as info:
        Registry([Steps(step_list)])
    return str(info.value)


def test_a_valid_flow_registers():
    Registry([Steps(StepList.start_step(Ok()).other_steps(OkStr()))])


def test_duplicate_step_type():
    msg = problems_of(StepList.start_step(Ok()).other_steps(Ok()))
    assert "BadFlow" in msg and "Ok" in msg and "duplicate" in msg


class Renamed(Ok):
    def __init__(self, name: str) -> None:
        self.name = name

    def get_step_type(self) -> str:
        return self.name


def test_duplicate_step_class():
    msg = problems_of(StepList.start_step(Renamed("A")).other_steps(Renamed("B")))
    assert "BadFlow" in msg and "Renamed" in msg and "duplicate step class" in msg


class SyncWithAsyncContext(Step[int]):
    def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return graceful_complete(input)


class AsyncWithContext(Step[int]):
    async def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


@pytest.mark.parametrize("bad", [SyncWithAsyncContext, AsyncWithContext])
def test_wrong_context_annotation(bad):
    msg = problems_of(StepList.start_step(Ok()).other_steps(bad()))
    assert f"flow BadFlow, step {bad.__name__}" in msg and "Context" in msg


class FastHeartbeat(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=5))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


def test_heartbeat_timeout_under_10_seconds():
    msg = problems_of(StepList.start_step(FastHeartbeat()))
    assert "flow BadFlow, step FastHeartbeat" in msg and "10 s" in msg


class TenSecondHeartbeat(FastHeartbeat):
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=10))


def test_heartbeat_timeout_of_exactly_10_seconds_is_allowed():
    Registry([Steps(StepList.start_step(TenSecondHeartbeat()))])


class RecoversToStr(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(OkStr)

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


# --- failure routes: registered as the official Registry registers them (it checks none) -------


class AsyncOkStr(Step[str]):
    async def execute(self, context: AsyncContext, input: str) -> StepDecision:
        return graceful_complete(input)


class Fails(Step[int]):
    recovery: type[Step[str]] = OkStr

    def get_step_options(self) -> StepOptions:
        once = StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))
        return once.on_execute_failure_proceed_to(self.recovery, StepOptions(execute_retry=RetryPolicy(
            maximum_attempts=3)))

    def execute(self, context: Context, input: int) -> StepDecision:
        raise RuntimeError("no luck")


class FailsToAsync(Fails):
    recovery = AsyncOkStr


class Begin(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(RoutesToInstance, input)


class RoutesToInstance(Ok):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(OkStr())  # type: ignore[arg-type]


def test_a_recovery_step_of_another_input_type_registers_with_a_warning():
    definition = Registry([Steps(StepList.start_step(RecoversToStr()).other_steps(OkStr()))]).get("BadFlow")
    assert definition is not None
    (warning,) = definition.warnings
    assert "flow BadFlow, step RecoversToStr: recovery step OkStr takes str, but RecoversToStr takes int" in warning


@pytest.mark.parametrize("failing, recovery", [(Fails, OkStr), (FailsToAsync, AsyncOkStr)])
def test_a_recovery_step_of_another_input_type_fails_when_its_input_does_not_decode(env, failing, recovery):
    """As on a Dex server: the recovery step gets the failed step's input (an int) and its codec
    refuses it; each attempt fails so (a thread's or a task's), until its retry policy gives up."""
    flow = Steps(StepList.start_step(failing()).other_steps(recovery()))
    result = env.run(flow, 3, "f")
    assert result.status is FlowStatus.FAILED
    step = next(s for s in env.inspect("f")["steps"] if s["stepType"] == recovery.__name__)
    assert [a["outcome"] for a in step["attempts"]] == ["FAILED"] * 3
    assert all("value does not fit str" in a["detail"] for a in step["attempts"])


def test_a_start_step_routing_failures_to_no_registered_step_is_refused_at_start(env):
    flow = Steps(StepList.start_step(RecoversToStr()))  # OkStr is not in the flow
    assert Registry([flow]).get("BadFlow") is not None  # registers, as with the official Registry
    with pytest.raises(FlowDefinitionError) as info:
        env.start(flow, 1, "f")
    assert str(info.value) == ("flow BadFlow, step RecoversToStr: on_execute_failure_proceed_to(OkStr) names a step "
                               "that is not registered: the start is refused")
    assert env.store.get_flow("f") is None


def test_a_failure_route_to_a_step_instance_registers_and_fails_when_the_step_is_scheduled(env):
    flow = Steps(StepList.start_step(Begin()).other_steps(RoutesToInstance(), OkStr()))
    definition = Registry([flow]).get("BadFlow")
    assert definition is not None and any("not an instance" in w for w in definition.warnings)
    result = env.run(flow, 1, "f")
    assert result.status is FlowStatus.FAILED
    assert "on_execute_failure_proceed_to takes a Step class, not an instance" in (result.error_message or "")


def test_every_problem_is_reported_at_once():
    with pytest.raises(FlowDefinitionError) as info:
        Registry([Steps(StepList.start_step(FastHeartbeat()).other_steps(SyncWithAsyncContext()))])
    assert len(info.value.problems) == 2


class AsyncOk(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return graceful_complete(input)


class AsyncWaitFor(Ok):
    async def wait_for(self, context: AsyncContext, input: int) -> Wait:
        return Wait.skip_immediately()


def test_async_handlers_are_allowed_with_allow_async_handlers():
    Registry([Steps(StepList.start_step(Ok()).other_steps(AsyncOk(), AsyncWaitFor()))], allow_async_handlers=True)


def test_async_handlers_are_refused_by_default_as_by_the_official_registry():
    why = ("this Registry has allow_async_handlers=False, the official SDK's default; "
           "a registry for an AsyncWorker passes allow_async_handlers=True")
    for registry in (lambda flows: Registry(flows), lambda flows: Registry(flows, allow_async_handlers=False)):
        with pytest.raises(FlowDefinitionError) as info:
            registry([Steps(StepList.start_step(Ok()).other_steps(AsyncOk(), AsyncWaitFor()))])
        assert info.value.problems == [
            f"flow BadFlow, step AsyncOk: execute must be synchronous ({why})",
            f"flow BadFlow, step AsyncWaitFor: wait_for must be synchronous ({why})",
        ]


def test_allow_async_handlers_false_applies_to_flows_added_later():
    registry = Registry(allow_async_handlers=False)
    with pytest.raises(FlowDefinitionError, match="step AsyncOk: execute must be synchronous"):
        registry.definition_of(Steps(StepList.start_step(AsyncOk())))
    assert registry.get("BadFlow") is None
    registry.add(Steps(StepList.start_step(Ok())))


def test_on_execute_failure_proceed_to_returns_a_copy():
    base = StepOptions()
    routed = base.on_execute_failure_proceed_to(OkStr)
    assert base.execute_failure_step is None and routed.execute_failure_step is OkStr


# --- value encoding -----------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Order:
    order_id: str
    qty: int
    color: Color


@dataclass(frozen=True)
class Receipt:
    order_id: str
    total: float
    colors: list[Color]


class Take(Step[Order]):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def execute(self, context: Context, input: Order) -> StepDecision:
        self.seen.append(input)
        return go_to(Bill, Receipt(order_id=input.order_id, total=input.qty * 2.5, colors=[input.color]))


class Bill(Step[Receipt]):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def execute(self, context: AsyncContext, input: Receipt) -> StepDecision:
        self.seen.append(input)
        return graceful_complete(input)


class OrderFlow(Flow[Order]):
    def __init__(self) -> None:
        self.take, self.bill = Take(), Bill()

    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(self.take).other_steps(self.bill)


def test_dataclass_and_enum_values_round_trip(env):
    flow = OrderFlow()
    result = env.run(flow, Order("o-1", 4, Color.BLUE), "f")
    assert result.status is FlowStatus.COMPLETED
    assert flow.take.seen == [Order("o-1", 4, Color.BLUE)]
    assert isinstance(flow.take.seen[0].color, Color)
    assert flow.bill.seen == [Receipt(order_id="o-1", total=10.0, colors=[Color.BLUE])]
    receipt = result.single_output(Receipt)
    assert isinstance(receipt, Receipt) and receipt.colors == [Color.BLUE]
    # stored as JSON, not pickled
    view = env.inspect("f")
    assert view["summary"]["input"] == {"order_id": "o-1", "qty": 4, "color": "blue"}
    raw = env.store.get_flow("f").input  # a FlowRecord (dexcli.store.records)
    assert json.loads(raw) == {"order_id": "o-1", "qty": 4, "color": "blue"}


def test_plain_json_input_is_decoded_into_the_declared_type(env):
    flow = OrderFlow()
    env.run(flow, {"order_id": "o-2", "qty": 1, "color": "red"}, "f")
    assert flow.take.seen == [Order("o-2", 1, Color.RED)]


@pytest.mark.parametrize("bad, field", [
    ({"order_id": "o", "qty": "many", "color": "red"}, "qty"),
    ({"order_id": "o", "qty": 1, "color": "green"}, "color"),
    ({"qty": 1, "color": "red"}, "order_id"),
])
def test_invalid_input_is_rejected_naming_the_field(env, bad, field):
    with pytest.raises(ValueMappingError) as info:
        env.start(OrderFlow(), bad, "f")
    assert field in str(info.value) and "Take" in str(info.value)
    assert env.store.get_flow("f") is None


def test_an_exception_in_the_flows_own_definition_code_is_a_definition_error():
    from dexcli.sdk.registry import build_definition

    class Raises(Flow[int]):
        def get_steps(self) -> StepList[int]:
            raise RuntimeError("oops in get_steps")

    with pytest.raises(FlowDefinitionError) as err:
        build_definition(Raises())
    assert "flow Raises: get_steps() raised RuntimeError: oops in get_steps" in str(err.value)


def test_a_fresh_instance_of_a_registered_flow_starts_the_registered_one(env):
    from dexcli_flows.three_steps import ThreeStepFlow

    registered = ThreeStepFlow()
    env.run(registered, 1, "a")
    env.start(ThreeStepFlow(), 2, "b")  # a new instance only names the flow, as with a Dex client
    env.drive()
    assert env.result("b").single_output(int) == 9
    assert env.engine.definitions.registry.get("ThreeStepFlow").flow is registered


def test_another_class_under_a_registered_flow_type_is_refused(env):
    from dexcli_flows import three_steps

    env.run(three_steps.ThreeStepFlow(), 1, "a")
    Impostor = type("ThreeStepFlow", (three_steps.ThreeStepFlow,), {})
    with pytest.raises(FlowDefinitionError, match="registered twice"):
        env.start(Impostor(), 1, "b")


# --- None is JSON null for any declared type (SDK 1.23's codec) --------------------------------


class Again(Step[Any]):
    """Runs twice: first with the start input, then with None (`go_to(self, None)`, as Dex's
    drain-signal-channels example moves to itself)."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def execute(self, context: Context, input: Any) -> StepDecision:
        self.seen.append(input)
        if input is None:
            return graceful_complete(len(self.seen))
        return go_to(type(self), None)


def _again_flow(tp: Any) -> Flow[Any]:
    step_cls = type(f"Again_{getattr(tp, '__name__', 'list')}", (Again,), {})
    step_cls.execute.__annotations__ = {"context": Context, "input": tp, "return": StepDecision}  # type: ignore
    step = step_cls()

    class NoneFlow(Flow[Any]):
        def get_flow_type(self) -> str:
            return "NoneFlow"

        def get_steps(self) -> StepList[Any]:
            return StepList.start_step(step)

    flow = NoneFlow()
    flow.step = step  # type: ignore[attr-defined]
    return flow


@pytest.mark.parametrize("tp, first", [(str, "first"), (int, 7), (Order, Order("o", 1, Color.RED)),
                                       (list[int], [1, 2])])
def test_none_moved_to_a_step_of_any_type_arrives_as_none(env, tp, first):
    """SDK 1.23 encodes None as null whatever the codec, and decodes null as None: the second
    attempt is no decode failure retried until the total duration."""
    flow = _again_flow(tp)
    result = env.run(flow, first, "f")
    assert result.status is FlowStatus.COMPLETED, result.error_message
    assert flow.step.seen == [first, None]  # type: ignore[attr-defined]
    assert [len(s["attempts"]) for s in env.inspect("f")["steps"]] == [1, 1]  # no retries


@pytest.mark.parametrize("tp", [str, Order])
def test_none_as_the_start_input_of_a_typed_step_is_null(env, tp):
    flow = _again_flow(tp)
    result = env.run(flow, None, "f")
    assert result.status is FlowStatus.COMPLETED, result.error_message
    assert flow.step.seen == [None]  # type: ignore[attr-defined]
    assert env.store.get_flow("f").input == "null"
