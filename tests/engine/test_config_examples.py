"""Dex's own examples that use FlowConfig and continue-as-new (superdurable/dex, examples/python:
primitives/flow and products/job-post), ported to SDK 1.23 — imports from dexcli, `go_to` and
`StepMovement.of` given Step classes — and driven the way each controller drives them. In virtual time.

What the ports leave out, and why: primitives/flow's `example_start_flow_options()` also sets a
flow-level `retry_policy`, which dex's StartFlowOptions does not have (the newest server refuses
it too); its `reroute_active_flow` names a `WorkerTarget`, which dex does not define (a stand-in
object shows dex refusing it loudly). job-post's flow syncs nothing to an Attribute Store, so
nothing of it is refused."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest

from dexcli import (
    Attribute,
    AttributeIndex,
    Channel,
    Context,
    Flow,
    FlowConfig,
    FlowStatus,
    FlowTimeoutPolicy,
    IdReusePolicy,
    IndexType,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    Wait,
    dead_end,
    force_fail,
    go_to,
    graceful_complete,
    rpc,
)
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.testing import DexTestEnv

# --- primitives/flow (example_flow.py) ----------------------------------------------------------


class FinishStep(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        status.set(context, "done")
        return graceful_complete(input + 1)


class ExampleStep(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        status.set(context, "running")
        del input
        return Wait.skip_immediately()

    def execute(self, context: Context, input: int) -> StepDecision:
        del context
        return go_to(FinishStep, input + 1)


status = Attribute("status", str)
notify = Channel("notify", None)


class ExampleFlow(Flow[int]):
    def __init__(self) -> None:
        self.finish = FinishStep()
        self.example = ExampleStep()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.example).other_steps(self.finish)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(status, notify)

    def handle_timeout(self, context: Context) -> StepDecision:
        status.set(context, "timed out")
        return force_fail("processing deadline reached")

    @rpc
    def describe(self, context: Context) -> RPCResult[str]:
        return RPCResult.of(status.get(context))


# primitives/flow (controller.py)
def start_flow_options() -> StartFlowOptions:
    return StartFlowOptions(
        timeout=timedelta(hours=1),
        config_override=FlowConfig(step_durability=StepDurability.SYNC),
    )


class WorkerTarget:
    """A stand-in for the official SDK's WorkerTarget (dex defines none: it has no workers to route to)."""

    def __init__(self, address: str) -> None:
        self.address = address


def reroute_active_flow(client: object, flow_id: str) -> None:
    client.update_flow_config(  # type: ignore[attr-defined]
        flow_id,
        FlowConfig(worker_target=WorkerTarget("worker-canary:8803")),
    )


def test_flow_primitive_starts_with_its_config_override_and_runs_to_the_end() -> None:
    with DexTestEnv() as env:
        flow = ExampleFlow()
        env.client.start_flow(flow, "wf-1", 5, start_flow_options())  # the controller's /start
        state = env.inspect("wf-1")["state"]
        assert state["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
        result = env.client.wait_for_flow("wf-1")
        assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 7
        assert env.inspect("wf-1")["state"]["attributes"] == {"status": "done"}


def test_flow_primitive_reroute_is_refused_loudly_and_changes_nothing() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(ExampleFlow(), "wf-2", 1, start_flow_options())
        with pytest.raises(NotSupportedYetError, match="worker_target"):
            reroute_active_flow(env.client, "wf-2")
        assert env.inspect("wf-2")["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
        assert env.client.wait_for_flow("wf-2").single_output(int) == 3


def test_flow_primitive_example_options_are_refused_for_their_flow_retry_policy() -> None:
    with pytest.raises(TypeError, match="retry_policy"):
        StartFlowOptions(  # type: ignore[call-arg]
            timeout=timedelta(minutes=30), timeout_policy=FlowTimeoutPolicy.HANDLER,
            start_delay=timedelta(minutes=5), id_reuse_policy=IdReusePolicy.DISALLOW,
            retry_policy=RetryPolicy(initial_interval=timedelta(minutes=1), backoff_coefficient=2,
                                     maximum_interval=timedelta(minutes=10), maximum_attempts=3),
            config_override=FlowConfig(step_durability=StepDurability.SYNC),
            ignore_already_started=True, request_id="start-order-123")
    # without it, the rest of the example's options start the flow as the page describes
    options = StartFlowOptions(
        timeout=timedelta(minutes=30), timeout_policy=FlowTimeoutPolicy.HANDLER,
        start_delay=timedelta(minutes=5), id_reuse_policy=IdReusePolicy.DISALLOW,
        config_override=FlowConfig(step_durability=StepDurability.SYNC),
        ignore_already_started=True, request_id="start-order-123").with_attribute(status, "queued")
    with DexTestEnv() as env:
        first = env.client.start_flow(ExampleFlow(), "order-123", 1, options)
        assert env.client.start_flow(ExampleFlow(), "order-123", 1, options) == first  # the same request
        assert env.inspect("order-123")["state"]["attributes"] == {"status": "queued"}
        assert env.client.wait_for_flow("order-123").single_output(int) == 3


# --- products/job-post ---------------------------------------------------------------------------


@dataclass
class JobInfo:
    title: str | None = None
    description: str | None = None
    notes: str | None = None


class MyDependencyService:
    def __init__(self) -> None:
        self.updates: list[str] = []

    def update_external_system(self, message: str) -> None:
        self.updates.append(message)


EXTERNAL_UPDATE_OPTIONS = StepOptions(
    execute_retry=RetryPolicy(
        initial_interval=timedelta(seconds=3),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=60),
        maximum_attempts=100,
        total_duration=timedelta(hours=1),
    )
)


class ExternalUpdate(Step[None]):
    def __init__(self, service: MyDependencyService) -> None:
        self.service = service

    def get_step_options(self) -> StepOptions:
        return EXTERNAL_UPDATE_OPTIONS

    def execute(self, context: Context, input: None) -> StepDecision:
        del context, input
        self.service.update_external_system("this is an update to external service")
        return dead_end()


class JobPostFlow(Flow[None]):
    title = Attribute("Title", str, AttributeIndex(IndexType.FULL_TEXT))
    job_description = Attribute("JobDescription", str, AttributeIndex(IndexType.FULL_TEXT))
    last_update_time_millis = Attribute("LastUpdateTimeMillis", int, AttributeIndex(IndexType.INT))
    notes = Attribute("Notes", str)

    def __init__(self, service: MyDependencyService) -> None:
        self.service = service
        self.external_update = ExternalUpdate(service)

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(self.external_update)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.title, self.job_description, self.last_update_time_millis, self.notes)

    @rpc
    def get(self, context: Context) -> RPCResult[JobInfo]:
        return RPCResult(self.read_job_info(context))

    @rpc
    def get_with_strong_consistency(self, context: Context) -> RPCResult[JobInfo]:
        return self.get(context)

    @rpc
    def update(self, context: Context, input: JobInfo) -> RPCResult[None]:
        self.title.set(context, input.title or "")
        self.job_description.set(context, input.description or "")
        self.last_update_time_millis.set(context, int(context_millis(context)))
        if input.notes is not None:
            self.notes.set(context, input.notes)
        return RPCResult(None, next_steps=(StepMovement.of(ExternalUpdate, None),))

    def read_job_info(self, context: Context) -> JobInfo:
        return JobInfo(self.title.get(context), self.job_description.get(context), self.notes.get(context))


TICK = [1_700_000_000_000]


def context_millis(context: Context) -> int:
    """The example's `time.time() * 1000`, made to advance with every update (ordering is testable)."""
    del context
    TICK[0] += 1000
    return TICK[0]


def create(env: DexTestEnv, flow: JobPostFlow, flow_id: str, title: str, description: str) -> None:
    """The controller's /create."""
    options = (
        StartFlowOptions(timeout=timedelta(hours=24), config_override=FlowConfig(continue_as_new_threshold=10))
        .with_attribute(flow.title, title)
        .with_attribute(flow.job_description, description)
        .with_attribute(flow.last_update_time_millis, TICK[0])
    )
    env.client.start_flow(flow, flow_id, None, options)


def update(env: DexTestEnv, flow: JobPostFlow, flow_id: str, info: JobInfo) -> None:
    """The controller's /update, then the worker pushes the change downstream (driven until it
    has: an idle drive would jump virtual time to the posting's 24-hour timeout)."""
    pushed = len(flow.service.updates) + 1
    env.client.invoke_rpc(flow.update, flow_id, info)
    env.drive([flow_id], until=lambda: len(flow.service.updates) == pushed)


def test_job_post_stays_one_searchable_posting_while_its_runs_continue_as_new() -> None:
    service = MyDependencyService()
    flow = JobPostFlow(service)
    with DexTestEnv() as env:
        create(env, flow, "job_id_1", "Software Engineer", "in Seattle")
        create(env, flow, "job_id_2", "Gardener", "in Portland")
        assert env.client.invoke_rpc(flow.get, "job_id_1") == JobInfo("Software Engineer", "in Seattle", None)
        for i in range(6):  # each update: an RPC and an ExternalUpdate execution, 2 of the 10 tracked events
            update(env, flow, "job_id_1", JobInfo(f"Senior Software Engineer {i}", "in Portland", f"notes {i}"))
        assert len(service.updates) == 6
        assert env.client.invoke_rpc(flow.get, "job_id_1") == JobInfo(
            "Senior Software Engineer 5", "in Portland", "notes 5")
        assert env.client.invoke_rpc(flow.get_with_strong_consistency, "job_id_1").notes == "notes 5"
        snap = env.inspect("job_id_1")
        assert [r["flowStatus"] for r in snap["runs"]] == ["FLOW_STATUS_CONTINUED_AS_NEW", "FLOW_STATUS_RUNNING"]
        assert snap["state"]["flowConfig"]["continueAsNewThreshold"] == 10  # the new run keeps its config
        assert snap["summary"]["timeout"] == 86400  # and its timeout
        # searchable and ordered, by the posting's current run
        hits = env.client.search_flows("Title = 'senior' AND JobDescription = 'portland'", 10)
        assert [(e.flow_id, e.indexed_attributes["Title"].data) for e in hits.flows] == [
            ("job_id_1", "Senior Software Engineer 5")]
        ordered = env.client.search_flows("ORDER BY LastUpdateTimeMillis DESC", 10)
        assert [e.flow_id for e in ordered.flows] == ["job_id_1", "job_id_2"]
        earlier = env.client.search_flows("Title = 'senior'", 10, include_continued_as_new=True)
        assert sorted(e.status.name for e in earlier.flows) == ["CONTINUED_AS_NEW", "RUNNING"]
        env.client.stop_flow("job_id_1")  # the controller's /delete
        assert env.client.wait_for_flow("job_id_1").status is FlowStatus.CANCELED
