"""Dex's own examples of child flows (superdurable/dex, examples/python): primitives/subflow
(a parent step waits on a SubFlow) and patterns/scalable-parallel (a receiver enqueues into
parents that start children with the client, each child reporting back by RPC), ported to SDK
1.23 — imports from dexcli, FlowNotActiveError as FlowNotActiveOrNotFoundError, an async execute
given an AsyncContext and `go_to` given Step classes, as SDK 1.23 requires — and driven the
way each controller drives them, in virtual time. patterns/parent-child has no SubFlow form
(both of its options use the client): tests/engine/test_client_examples.py ports it."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from dexcli import (
    AsyncClient,
    AsyncContext,
    Attribute,
    Channel,
    ChannelMap,
    Context,
    Flow,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowTimeoutPolicy,
    IdReusePolicy,
    PersistenceSchema,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    SubFlow,
    SubFlowOptions,
    Timer,
    Wait,
    force_complete_if_channels_empty,
    go_to,
    graceful_complete,
    rpc,
)
from dexcli.testing import DexTestEnv


def start_options() -> StartFlowOptions:  # dex_examples.config.start_options()
    return StartFlowOptions(timeout=timedelta(hours=1))


# ------------------------------------------------------------------- primitives/subflow ----
class SubFlowChildStep(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        del context
        return graceful_complete(input + 1)


class SubFlowChildFlow(Flow[int]):
    def __init__(self) -> None:
        self.start = SubFlowChildStep()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


class SubFlowParentStep(Step[int]):
    def __init__(self, target: Flow[int]) -> None:
        self.target = target
        self.options = SubFlowOptions(
            timeout=timedelta(hours=1),
            timeout_policy=FlowTimeoutPolicy.CANCEL,
        )

    def wait_for(self, context: Context, input: int) -> Wait:
        del context
        return Wait.until(SubFlow.run(self.target, input, self.options))

    def execute(self, context: Context, input: int) -> StepDecision:
        del input
        result = SubFlow.get_condition_results(context)
        output = result.single_output(int)
        return graceful_complete(f"{SubFlow.get_flow_id(context)}|{output}")


class SubFlowParentFlow(Flow[int]):
    def __init__(self, target: Flow[int]) -> None:
        self.start = SubFlowParentStep(target)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.start)


def test_subflow_primitive_the_parent_waits_for_its_child_and_reads_its_result() -> None:
    with DexTestEnv() as env:
        # the example app registers both flows on its worker; the controller starts the parent
        parent = SubFlowParentFlow(SubFlowChildFlow())
        env.client.start_flow(parent, "wf-1", 41, start_options())  # GET /start?workflowId=wf-1&inputNum=41
        result = env.client.wait_for_flow("wf-1")
        assert result.single_output(str) == "SubFlow:wf-1-SubFlowParentStep-1-0|42"
        kid = env.inspect("SubFlow:wf-1-SubFlowParentStep-1-0")
        assert kid["summary"]["flowType"] == "SubFlowChildFlow" and kid["summary"]["flowStatus"] == "COMPLETED"
        assert kid["summary"]["parentFlowId"] == "wf-1"
        assert (kid["summary"]["timeout"], kid["summary"]["timeoutPolicy"]) == (3600, "CANCEL")  # its options
        assert [c["flowId"] for c in env.inspect("wf-1")["subFlows"]] == ["SubFlow:wf-1-SubFlowParentStep-1-0"]


# ---------------------------------------------------------- patterns/scalable-parallel ----
NUM_PARENT_WORKFLOWS = 2
CONCURRENCY_PER_PARENT_WORKFLOW = 3
MAX_BUFFERED_TASKS = 10


@dataclass
class BatchEnqueueRequest:
    items: list[str] = field(default_factory=list)


class EnqueueFailedError(RuntimeError):
    """Raised when a ParentFlow rejects a batch because its queue is full."""


class Processing(Step[str]):
    def __init__(self, client_provider: Callable[[], AsyncClient],
                 parent_flow_provider: Callable[[], ParentFlow], parent_workflow_id: Attribute[str]) -> None:
        self.client_provider = client_provider
        self.parent_flow_provider = parent_flow_provider
        self.parent_workflow_id = parent_workflow_id

    def wait_for(self, context: Context, input: str) -> Wait:
        del context, input
        return Wait.until(Timer.by_duration(timedelta(seconds=random.randint(1, 3))))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        del input
        try:
            parent_id = self.parent_workflow_id.get(context)
        except Exception:
            parent_id = ""
        if parent_id:
            try:
                await self.client_provider().invoke_rpc(
                    self.parent_flow_provider().complete_child_workflow, parent_id, context.flow_id)
            except FlowNotActiveOrNotFoundError:
                print("Parent workflow may have completed, might be duplicate completion request, ignore it.")
        return graceful_complete()


class ChildFlow(Flow[str]):
    PARENT_WORKFLOW_ID = "ParentWorkflowId"
    parent_workflow_id = Attribute(PARENT_WORKFLOW_ID, str)

    def __init__(self, client_provider: Callable[[], AsyncClient],
                 parent_flow_provider: Callable[[], ParentFlow]) -> None:
        self.processing = Processing(client_provider, parent_flow_provider, self.parent_workflow_id)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.processing)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.parent_workflow_id)


class LoopForNextMessage(Step[None]):
    def __init__(self, client_provider: Callable[[], AsyncClient], child_flow: ChildFlow,
                 task_queue: Channel[str], child_complete: ChannelMap[None],
                 current_wait_child_wfs: Attribute[list[str]]) -> None:
        self.client_provider = client_provider
        self.child_flow = child_flow
        self.task_queue = task_queue
        self.child_complete = child_complete
        self.current_wait_child_wfs = current_wait_child_wfs

    def wait_for(self, context: Context, input: None) -> Wait:
        del input
        waiting = self.current_wait_child_wfs.get(context) or []
        conditions = [self.child_complete.for_one(child_wf_id) for child_wf_id in waiting]
        if len(waiting) < CONCURRENCY_PER_PARENT_WORKFLOW:
            conditions.insert(0, self.task_queue.for_one())
        return Wait.any_of(*conditions)

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        del input
        new_wait_list = list(self.current_wait_child_wfs.get(context) or [])
        task_results = self.task_queue.results(context)
        if task_results:
            request = task_results[0]
            child_workflow_id = f"processing-{request}"
            try:
                await self.client_provider().start_flow(
                    self.child_flow, child_workflow_id, request,
                    StartFlowOptions(timeout=timedelta(hours=1), ignore_already_started=True,
                                     request_id=context.step_execution_id, id_reuse_policy=IdReusePolicy.DISALLOW,
                                     ).with_attribute(ChildFlow.parent_workflow_id, context.flow_id))
                new_wait_list.append(child_workflow_id)
            except FlowAlreadyStartedError:
                print("already started by other state/workflow, ignore it -- not waiting for it")
        for child_wf_id in list(new_wait_list):
            if self.child_complete.results(context, child_wf_id):
                new_wait_list.remove(child_wf_id)
        self.current_wait_child_wfs.set(context, new_wait_list)
        if not new_wait_list:
            return force_complete_if_channels_empty(None, StepMovement.of(LoopForNextMessage, None), self.task_queue)
        return go_to(LoopForNextMessage, None)


class Init(Step[BatchEnqueueRequest]):
    def __init__(self, loop_for_next_message: LoopForNextMessage, task_queue: Channel[str]) -> None:
        self.loop_for_next_message = loop_for_next_message
        self.task_queue = task_queue

    def execute(self, context: Context, input: BatchEnqueueRequest) -> StepDecision:
        for item in input.items:
            self.task_queue.publish(context, item)
        return go_to(LoopForNextMessage, None)


class ParentFlow(Flow[BatchEnqueueRequest]):
    task_queue = Channel("TaskQueue", str)
    child_complete = ChannelMap[None]("ChildComplete_", type(None))
    current_wait_child_wfs = Attribute("CurrentWaitChildWfs", list[str])

    def __init__(self, client_provider: Callable[[], AsyncClient], child_flow: ChildFlow) -> None:
        self.loop_for_next_message = LoopForNextMessage(client_provider, child_flow, self.task_queue,
                                                        self.child_complete, self.current_wait_child_wfs)
        self.init = Init(self.loop_for_next_message, self.task_queue)

    def get_steps(self) -> StepList[BatchEnqueueRequest]:
        return StepList.start_step(self.init).other_steps(self.loop_for_next_message)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.task_queue, self.child_complete, self.current_wait_child_wfs)

    @rpc
    def enqueue(self, context: Context, input: BatchEnqueueRequest) -> RPCResult[bool]:
        if self.task_queue.size(context) + len(input.items) > MAX_BUFFERED_TASKS:
            return RPCResult(False)
        for item in input.items:
            self.task_queue.publish(context, item)
        return RPCResult(True)

    @rpc
    def complete_child_workflow(self, context: Context, input: str) -> None:
        self.child_complete.publish(context, input, None)


class Request(Step[int]):
    def __init__(self, client_provider: Callable[[], AsyncClient], parent_flow: ParentFlow) -> None:
        self.client_provider = client_provider
        self.parent_flow = parent_flow

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # type: ignore[override]
        batch = BatchEnqueueRequest([str(uuid.UUID(int=random.getrandbits(128))) for _ in range(input)])
        parent_workflow_id = f"{context.flow_id}-parent-{random.randint(1, NUM_PARENT_WORKFLOWS)}"
        client = self.client_provider()
        try:
            if not await client.invoke_rpc(self.parent_flow.enqueue, parent_workflow_id, batch):
                raise EnqueueFailedError("Enqueue failed, retry in next attempt")
        except FlowNotActiveOrNotFoundError:
            await client.start_flow(self.parent_flow, parent_workflow_id, batch, StartFlowOptions(
                timeout=timedelta(hours=1), id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING))
        return graceful_complete()


class RequestReceiverFlow(Flow[int]):
    def __init__(self, client_provider: Callable[[], AsyncClient], parent_flow: ParentFlow) -> None:
        self.request = Request(client_provider, parent_flow)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.request)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of()


RETRY_PREVIOUS_FAILED = StartFlowOptions(timeout=timedelta(hours=1),
                                         id_reuse_policy=IdReusePolicy.ALLOW_IF_PREVIOUS_FAILED)


def test_scalable_parallel_runs_every_task_in_a_child_at_most_three_at_a_time_per_parent() -> None:
    random.seed(7)
    with DexTestEnv() as env:
        aclient = AsyncClient(engine=env.engine)
        holder: dict[str, ParentFlow] = {}
        child = ChildFlow(lambda: aclient, lambda: holder["parent"])
        parent = holder["parent"] = ParentFlow(lambda: aclient, child)
        receiver = RequestReceiverFlow(lambda: aclient, parent)
        env.client.start_flow(receiver, "recv", 8, RETRY_PREVIOUS_FAILED)  # GET /start?numOfChildWfs=8
        assert env.client.wait_for_flow("recv").status.name == "COMPLETED"
        parents = [f for f in env.store.list_flows() if f.flow_id.startswith("recv-parent-")]
        assert len(parents) == 1  # the batch went to one parent, started with it as its input
        pid = parents[0].flow_id
        assert env.client.wait_for_flow(pid).status.name == "COMPLETED"  # it completes once the queue drains
        children = [f for f in env.store.list_flows() if f.flow_id.startswith("processing-")]
        assert len(children) == 8 and all(c.status.name == "COMPLETED" for c in children)
        # bounded concurrency: never more than CONCURRENCY_PER_PARENT_WORKFLOW children running at once
        spans = [(c.start_time, c.close_time or 0.0) for c in children]
        for start, _ in spans:
            running = sum(1 for s, e in spans if s <= start < e)
            assert running <= CONCURRENCY_PER_PARENT_WORKFLOW
        assert max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans) == CONCURRENCY_PER_PARENT_WORKFLOW
        # a full queue is refused: a batch past MAX_BUFFERED_TASKS on a running parent
        env.client.start_flow(parent, "busy", BatchEnqueueRequest(["a"] * 5), start_options())
        env.drive(["busy"], until=lambda: env.store.steps_of("busy")[0].status.name == "COMPLETED")  # Init ran
        assert env.client.invoke_rpc(parent.enqueue, "busy", BatchEnqueueRequest(["b"] * 6)) is False
        assert env.client.invoke_rpc(parent.enqueue, "busy", BatchEnqueueRequest(["b"] * 4)) is True
