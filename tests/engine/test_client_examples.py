"""Dex's own examples that call the Client around and inside steps (superdurable/dex,
examples/python: patterns/wait-for-state-completion, products/order-processing,
patterns/parent-child in its async form and sync-python's), ported to SDK 1.23 — imports from
dexcli, `go_to` given Step classes, `wait_for_step_completion` given its options — and driven the
way each controller drives them. In virtual time."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dexcli import (
    AsyncClient,
    AsyncContext,
    Attribute,
    AttributeIndex,
    Channel,
    Client,
    Context,
    Flow,
    FlowAlreadyStartedError,
    IndexType,
    LongPollTimeoutError,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    WaitForStepCompletionOptions,
    go_to,
    go_to_many,
    graceful_complete,
    rpc,
)
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

START = StartFlowOptions(timeout=timedelta(hours=1))  # the examples' start_options()


def step_wait(minutes: int) -> WaitForStepCompletionOptions:
    return WaitForStepCompletionOptions(request_timeout=timedelta(minutes=minutes))


class Service:
    """The examples' service dependency: records what it was asked to do."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Callable[..., None]:
        def call(*args: Any) -> None:
            self.calls.append(name)
            if name == "ship_item" and args[1]:
                raise RuntimeError("shipping failed")

        return call


# ----------------------------------------------------- patterns/wait-for-state-completion ----
@dataclass
class JobSeekerData:
    id: int
    name: str = "Test Job Seeker"


class UpdateExternalSystem(Step[JobSeekerData]):
    def __init__(self, service: Service) -> None:
        self.service = service

    def execute(self, context: Context, input: JobSeekerData) -> StepDecision:
        self.service.update_external_system(input.id)
        return graceful_complete()


class PersistData(Step[JobSeekerData]):
    def __init__(self, service: Service, data: Attribute[JobSeekerData]) -> None:
        self.service = service
        self.data = data

    def execute(self, context: Context, input: JobSeekerData) -> StepDecision:
        self.service.upsert(input)
        self.data.set(context, input)
        return go_to(UpdateExternalSystem, input)


class WaitForStateCompletionFlow(Flow[JobSeekerData]):
    job_seeker_data = Attribute("job_seeker_data", JobSeekerData)

    def __init__(self, service: Service) -> None:
        self.update_external_system = UpdateExternalSystem(service)
        self.persist_data = PersistData(service, self.job_seeker_data)

    def get_steps(self) -> StepList[JobSeekerData]:
        return StepList.start_step(self.persist_data).other_steps(self.update_external_system)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.job_seeker_data)

    @rpc
    def get_job_seeker_data(self, context: Context) -> RPCResult[JobSeekerData]:
        data = self.job_seeker_data.get(context)
        if data is None:
            raise RuntimeError("Job seeker data was not persisted to the data store")
        return RPCResult(data)


def test_wait_for_state_completion_returns_after_persist_data_without_waiting_for_the_rest() -> None:
    with DexTestEnv() as env:
        service = Service()
        flow = WaitForStateCompletionFlow(service)
        env.client.start_flow(flow, "w1", JobSeekerData(1), START)
        env.client.wait_for_step_completion("w1", StepExecutionId("PersistData"), step_wait(5))
        assert env.client.invoke_rpc(flow.get_job_seeker_data, "w1") == JobSeekerData(1)
        assert service.calls == ["upsert"]  # the caller did not block on the external update
        assert env.client.wait_for_flow("w1", timedelta(minutes=1)).status.name == "COMPLETED"
        assert service.calls == ["upsert", "update_external_system"]  # each step ran once


# ----------------------------------------------------- products/order-processing -------------
order_status = Attribute("order-status", str, AttributeIndex(IndexType.KEYWORD))
seller_ok = Channel[str]("seller-ok", str)


@dataclass
class OrderRequest:
    order_id: str
    email: str
    customer_id: str
    amount: int
    test_fail_at_shipping: bool = False


def three_seconds() -> StepOptions:
    return StepOptions(execute_retry=RetryPolicy(total_duration=timedelta(seconds=3)))


class ChargeStep(Step[OrderRequest]):
    def __init__(self, service: Service) -> None:
        self.service = service

    def get_step_options(self) -> StepOptions:
        return three_seconds()

    def execute(self, context: Context, input: OrderRequest) -> StepDecision:
        self.service.charge_user(input.email, input.customer_id, input.amount)
        order_status.set(context, "charged")
        return go_to(ShipStep, input)


class RefundStep(Step[OrderRequest]):
    def __init__(self, service: Service) -> None:
        self.service = service

    def execute(self, context: Context, input: OrderRequest) -> StepDecision:
        self.service.update_external_system(f"refund {input.order_id}")
        order_status.set(context, "refunded")
        return graceful_complete(f"refunded:{input.order_id}")


class ShipStep(Step[OrderRequest]):
    def __init__(self, service: Service, refund: RefundStep) -> None:
        self.service = service
        self.refund = refund

    def get_step_options(self) -> StepOptions:
        return three_seconds().on_execute_failure_proceed_to(RefundStep, three_seconds())

    def wait_for(self, context: Context, input: OrderRequest) -> Wait:
        return Wait.any_of(seller_ok.for_one(), Timer.by_duration(timedelta(hours=24)))

    def execute(self, context: Context, input: OrderRequest) -> StepDecision:
        if context.has_timer_fired():
            self.service.send_email(input.email, "Reminder: approve shipment", "...")
            return go_to(ShipStep, input)
        self.service.ship_item(input.order_id, input.test_fail_at_shipping)
        order_status.set(context, "shipped")
        return graceful_complete(f"shipped:{input.order_id}")


class OrderProcessingFlow(Flow[OrderRequest]):
    def __init__(self, service: Service) -> None:
        self.refund = RefundStep(service)
        self.ship = ShipStep(service, self.refund)
        self.charge = ChargeStep(service)

    def get_steps(self) -> StepList[OrderRequest]:
        return StepList.start_step(self.charge).other_steps(self.ship, self.refund)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(order_status, seller_ok)

    @rpc
    def approve(self, context: Context, _note: str) -> RPCResult[str]:
        seller_ok.publish(context, "approved")
        return RPCResult("ok")

    @rpc
    def describe(self, context: Context) -> RPCResult[str]:
        return RPCResult(order_status.get(context))


def _order(env: DexTestEnv, flow: OrderProcessingFlow, flow_id: str, fail_at_shipping: bool) -> str:
    """The controller: /start (returns once ChargeStep completed), /approve, /describe."""
    env.client.start_flow(flow, flow_id, OrderRequest(flow_id, "buyer@example.com", "customer-1", 42,
                                                      fail_at_shipping), START)
    env.client.wait_for_step_completion(flow_id, StepExecutionId("ChargeStep"), step_wait(5))
    assert env.client.invoke_rpc(flow.describe, flow_id) == "charged"
    assert env.client.invoke_rpc(flow.approve, flow_id, "") == "ok"
    return env.client.wait_for_flow(flow_id, timedelta(minutes=5)).single_output(str)


def test_order_processing_charges_waits_for_the_seller_and_ships() -> None:
    with DexTestEnv() as env:
        service = Service()
        flow = OrderProcessingFlow(service)
        assert _order(env, flow, "o1", False) == "shipped:o1"
        assert env.client.invoke_rpc(flow.describe, "o1") == "shipped"
        assert service.calls == ["charge_user", "ship_item"]  # no reminder: approved before 24 h


def test_order_processing_refunds_when_shipping_exhausts_its_retries() -> None:
    with DexTestEnv() as env:
        service = Service()
        flow = OrderProcessingFlow(service)
        assert _order(env, flow, "o2", True) == "refunded:o2"
        assert env.client.invoke_rpc(flow.describe, "o2") == "refunded"
        assert service.calls[0] == "charge_user" and service.calls[-1] == "update_external_system"
        assert service.calls.count("ship_item") >= 2  # retried for its 3 s, then routed to RefundStep


# ----------------------------------------------------- patterns/parent-child (option 2) ------
CONCURRENCY_PER_PARENT_WORKFLOW = 3
MAX_WAIT_SECONDS = 10


@dataclass
class WaitForChildInput:
    child_wf_id: str
    timer_seconds: int


class ChildProcessing(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=random.randint(1, 3))))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete()


class ChildFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(ChildProcessing())


task_queue = Channel("task_queue", int)


class LoopForNextTask(Step[None]):
    def __init__(self, start: type[Step[int]]) -> None:
        self.start = start

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.until(task_queue.for_one())

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(self.start, task_queue.results(context)[0])


class Init(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        for index in range(input):
            task_queue.publish(context, index)
        return go_to_many(*(StepMovement.of(LoopForNextTask, None) for _ in range(CONCURRENCY_PER_PARENT_WORKFLOW)))


class StartChildWorkflow(Step[int]):
    def __init__(self, client: Callable[[], Client]) -> None:
        self.client = client

    def execute(self, context: Context, input: int) -> StepDecision:
        child_id = f"{context.flow_id}-child-{input}"
        with contextlib.suppress(FlowAlreadyStartedError):
            self.client().start_flow(ChildFlow(), child_id, str(input), START)
        return go_to(AwaitChildWorkflowCompletion, WaitForChildInput(child_id, 1))


class AwaitChildWorkflowCompletion(Step[WaitForChildInput]):
    def __init__(self, client: Callable[[], Client]) -> None:
        self.client = client

    def wait_for(self, context: Context, input: WaitForChildInput) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input.timer_seconds)))

    def execute(self, context: Context, input: WaitForChildInput) -> StepDecision:
        try:
            self.client().wait_for_flow(input.child_wf_id, timedelta(seconds=max(input.timer_seconds, 1)))
        except LongPollTimeoutError:
            return go_to(AwaitChildWorkflowCompletion,
                         WaitForChildInput(input.child_wf_id, min(input.timer_seconds * 2, MAX_WAIT_SECONDS)))
        return go_to(LoopForNextTask, None)


class AsyncStartChildWorkflow(Step[int]):
    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self.client = client

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        child_id = f"{context.flow_id}-child-{input}"
        with contextlib.suppress(FlowAlreadyStartedError):
            await self.client().start_flow(ChildFlow(), child_id, str(input), START)
        return go_to(AsyncAwaitChildWorkflowCompletion, WaitForChildInput(child_id, 1))


class AsyncAwaitChildWorkflowCompletion(Step[WaitForChildInput]):
    def __init__(self, client: Callable[[], AsyncClient]) -> None:
        self.client = client

    def wait_for(self, context: Context, input: WaitForChildInput) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input.timer_seconds)))

    async def execute(self, context: AsyncContext, input: WaitForChildInput  # type: ignore[override]
                      ) -> StepDecision:
        try:
            await self.client().wait_for_flow(input.child_wf_id, timedelta(seconds=max(input.timer_seconds, 1)))
        except LongPollTimeoutError:
            return go_to(AsyncAwaitChildWorkflowCompletion,
                         WaitForChildInput(input.child_wf_id, min(input.timer_seconds * 2, MAX_WAIT_SECONDS)))
        return go_to(LoopForNextTask, None)


class ParentFlowV2(Flow[int]):
    def __init__(self, start: Step[int], await_child: Step[WaitForChildInput]) -> None:
        self.steps = (LoopForNextTask(type(start)), start, await_child)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Init()).other_steps(*self.steps)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(task_queue)


def _parent_child(env: DexTestEnv, parent: ParentFlowV2, n: int) -> None:
    """The controller's /start, then (as a user would) watch until every child has ended."""
    env.client.start_flow(parent, "p", n, START)
    children = [f"p-child-{i}" for i in range(n)]

    def all_done_and_looped_back() -> bool:
        rows = [env.store.get_flow(c) for c in children]
        looping = [s for s in env.store.steps_of("p") if s.step_type == "LoopForNextTask" and s.status.is_open]
        return (all(r is not None and not r.is_running for r in rows)
                and len(looping) == CONCURRENCY_PER_PARENT_WORKFLOW
                and all(s.status.value == "WAITING" for s in looping))

    env.drive(["p"], until=all_done_and_looped_back, poll=1.0)
    assert [env.client.result(c).status.name for c in children] == ["COMPLETED"] * n
    parent_state = env.inspect("p")
    assert parent_state["summary"]["flowStatus"] == "RUNNING"  # each branch waits for the next task
    outcomes = {a["outcome"] for s in parent_state["steps"] for a in s["attempts"]}
    assert outcomes <= {"COMPLETED", None}, outcomes  # nothing lost, timed out or interrupted
    starts = [s for s in parent_state["steps"] if s["stepType"].endswith("StartChildWorkflow")]
    assert len(starts) == n  # one start per task


def test_parent_child_sync_starts_every_child_and_waits_for_each_with_the_client() -> None:
    random.seed(1)
    with DexTestEnv() as env:
        parent = ParentFlowV2(StartChildWorkflow(lambda: env.client), AwaitChildWorkflowCompletion(lambda: env.client))
        _parent_child(env, parent, 5)


def test_parent_child_async_starts_every_child_and_waits_for_each_with_the_async_client() -> None:
    random.seed(2)
    with DexTestEnv() as env:
        aclient = AsyncClient(engine=env.engine)
        parent = ParentFlowV2(AsyncStartChildWorkflow(lambda: aclient),
                              AsyncAwaitChildWorkflowCompletion(lambda: aclient))
        _parent_child(env, parent, 5)
