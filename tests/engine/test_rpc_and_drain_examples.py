"""Dex's job-post and drain-signal-channels examples (superdurable/dex, examples/python:
products/job-post, patterns/drain-channels/signal), ported to SDK 1.23 — imports from dexcli,
movements given Step classes (`StepMovement.of(ExternalUpdate, None)`, not the instance: SDK
1.23's worker maps a movement by class), an async `execute` taking AsyncContext — and driven
the way each controller.py drives them: an AsyncClient beside a running worker, on the
virtual clock. What each README says is what is checked.

One further change the port needs, as SDK 1.23 lacks the name: drain-signal's
`client.publish(...)` (client-side channel publish, not in SDK 1.23) becomes an RPC that
publishes, with FlowNotActiveOrNotFoundError for the controller's FlowNotActiveError. The
job-post controller's `config_override=FlowConfig(continue_as_new_threshold=10)` is kept: the
posting's runs continue as new every ten tracked events (an update is two: its RPC and the
ExternalUpdate it starts).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    AsyncContext,
    Attribute,
    AttributeIndex,
    Channel,
    Context,
    Flow,
    FlowConfig,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    IndexType,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    Wait,
    dead_end,
    force_complete_if_channels_empty,
    rpc,
)
from dexcli.engine.clock import run as run_on_clock
from dexcli.engine.doctor import check_flow
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv

START = StartFlowOptions(timeout=timedelta(hours=1))  # the examples' config.start_options()


class MyDependencyService:
    """The examples' shared service: records what it was asked, and fails its first `failures` calls."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.updates: list[str] = []

    def update_external_system(self, message: str) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the external system is down")
        self.updates.append(message)


def serve(env: DexTestEnv, requests: Callable[[AsyncClient], Awaitable[Any]]) -> Any:
    """The example app: a worker driving every flow while `requests` (the HTTP calls a user makes,
    through the controller) run against the same database with an AsyncClient."""
    client = AsyncClient(engine=env.engine)
    out: list[Any] = []

    async def app() -> None:
        worker = asyncio.ensure_future(env.engine.drive_async(None, until_idle=False, until=lambda: bool(out), poll=1,
                                                              release=False))
        await asyncio.sleep(0)
        out.append(await requests(client))
        await worker

    run_on_clock(app, env.clock)
    return out[0]


# ----------------------------------------------------- products/job-post ---------------------
@dataclass
class JobInfo:
    title: str | None = None
    description: str | None = None
    notes: str | None = None


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
        self.last_update_time_millis.set(context, int(time.time() * 1000))
        if input.notes is not None:
            self.notes.set(context, input.notes)
        return RPCResult(None, next_steps=(StepMovement.of(ExternalUpdate, None),))

    def read_job_info(self, context: Context) -> JobInfo:
        return JobInfo(self.title.get(context), self.job_description.get(context), self.notes.get(context))


class JobPostController:
    """controller.py's endpoints, their query strings as arguments."""

    def __init__(self, client: AsyncClient, flow: JobPostFlow) -> None:
        self.client, self.job_post = client, flow

    async def create(self, flow_id: str, title: str, description: str) -> str:
        flow = self.job_post
        options = (
            StartFlowOptions(timeout=timedelta(hours=24), config_override=FlowConfig(continue_as_new_threshold=10))
            .with_attribute(flow.title, title)
            .with_attribute(flow.job_description, description)
            .with_attribute(flow.last_update_time_millis, int(time.time() * 1000))
        )
        await self.client.start_flow(flow, flow_id, None, options)
        return f"started workflowId: {flow_id}"

    async def read(self, workflow_id: str) -> dict[str, Any]:
        return asdict(await self.client.invoke_rpc(self.job_post.get, workflow_id))

    async def update(self, workflow_id: str, title: str, description: str, notes: str = "test-notes") -> str:
        await self.client.invoke_rpc(self.job_post.update, workflow_id, JobInfo(title, description, notes))
        return "updated"

    async def delete(self, workflow_id: str) -> str:
        await self.client.stop_flow(workflow_id)
        return "marked as soft deleted, will be delete later after retention"


def test_job_post_starts_idle_and_everything_happens_through_rpcs() -> None:
    with DexTestEnv() as env:
        service = MyDependencyService()
        flow = JobPostFlow(service)

        async def user(client: AsyncClient) -> list[Any]:
            api = JobPostController(client, flow)
            said = [await api.create("job_id_1", "Software Engineer", "in Seattle")]
            await asyncio.sleep(5)
            said.append(await api.read("job_id_1"))
            said.append(service.updates[:])  # the start ran no step
            said.append(await api.update("job_id_1", "Senior Software Engineer", "in Portland", "testnotes"))
            await asyncio.sleep(5)
            said.append(await api.read("job_id_1"))
            said.append(await client.invoke_rpc(flow.get_with_strong_consistency, "job_id_1"))
            return said

        created, first, before, updated, second, strong = serve(env, user)
        assert created == "started workflowId: job_id_1"
        assert first == {"title": "Software Engineer", "description": "in Seattle", "notes": None}
        assert before == []
        assert updated == "updated"
        assert second == {"title": "Senior Software Engineer", "description": "in Portland", "notes": "testnotes"}
        assert strong == JobInfo("Senior Software Engineer", "in Portland", "testnotes")
        assert service.updates == ["this is an update to external service"]  # ExternalUpdate pushed it once
        view = env.inspect("job_id_1")
        assert view["summary"]["flowStatus"] == "RUNNING"  # long-lived: ExternalUpdate dead-ends, RPCs go on
        assert [s["stepType"] for s in view["steps"]] == ["ExternalUpdate"]
        assert view["steps"][0]["fromStepExecutionId"] == "__rpc/update"
        assert check_flow(env.store, env.store.get_flow("job_id_1")) == []


def test_job_post_pushes_downstream_with_its_bounded_exponential_retry_and_delete_stops_it() -> None:
    with DexTestEnv() as env:
        service = MyDependencyService(failures=3)
        flow = JobPostFlow(service)

        async def user(client: AsyncClient) -> str:
            api = JobPostController(client, flow)
            await api.create("job_id_2", "Software Engineer", "in Seattle")
            await api.update("job_id_2", "Staff Engineer", "remote")
            await asyncio.sleep(60)
            return await api.delete("job_id_2")

        assert serve(env, user) == "marked as soft deleted, will be delete later after retention"
        assert service.updates == ["this is an update to external service"]
        (step,) = env.inspect("job_id_2")["steps"]
        starts = [a["startTime"] for a in step["attempts"]]
        gaps = [round(_seconds(b) - _seconds(a)) for a, b in zip(starts, starts[1:], strict=False)]
        assert gaps == [3, 6, 12]  # initial 3 s, coefficient 2
        assert env.result("job_id_2").status is FlowStatus.CANCELED


def test_job_post_continues_as_new_every_ten_tracked_events_and_stays_one_searchable_posting() -> None:
    with DexTestEnv() as env:
        service = MyDependencyService()
        flow = JobPostFlow(service)

        async def user(client: AsyncClient) -> list[Any]:
            api = JobPostController(client, flow)
            await api.create("job_id_3", "Software Engineer", "in Seattle")
            for i in range(6):
                await api.update("job_id_3", f"Senior Software Engineer {i}", "in Portland", f"notes {i}")
                await asyncio.sleep(5)
            page = await client.search_flows("Title = 'senior'", 10)
            every = await client.search_flows("Title = 'senior'", 10, include_continued_as_new=True)
            return [await api.read("job_id_3"), page, every]

        read, page, every = serve(env, user)
        assert read == {"title": "Senior Software Engineer 5", "description": "in Portland", "notes": "notes 5"}
        assert len(service.updates) == 6  # every update pushed downstream once
        view = env.inspect("job_id_3")
        # 5 updates = 10 tracked events: the run rolled over; the sixth is in the new run
        assert [r["status"] for r in view["runs"]] == ["CONTINUED_AS_NEW", "RUNNING"]
        assert [s["stepExecutionId"] for s in view["steps"]] == ["ExternalUpdate-6"]
        assert view["state"]["attributes"]["Notes"] == "notes 5"
        assert [e.flow_id for e in page.flows] == ["job_id_3"] and page.flows[0].run_id == view["summary"]["runId"]
        assert sorted(e.status.name for e in every.flows) == ["CONTINUED_AS_NEW", "RUNNING"]
        assert check_flow(env.store, env.store.get_flow("job_id_3")) == []


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# ----------------------------------------------------- patterns/drain-channels/signal --------
DRAIN_WINDOW_SECONDS = 20


class ProcessSignal(Step[str]):
    def __init__(self, queue_signal_channel: Channel[str], processed: list[str]) -> None:
        self.queue_signal_channel = queue_signal_channel
        self.processed = processed

    def wait_for(self, context: Context, input: str) -> Wait:
        del context
        if input is None:
            return Wait.until(self.queue_signal_channel.for_one())
        return Wait.skip_immediately()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # type: ignore[override]
        if input is not None:
            self.processed.append(f"DrainSignalChannelsFlow process signal value: {input}")
        else:
            values = self.queue_signal_channel.results(context)
            if not values:
                raise RuntimeError("No signal request found")
            value = values[0]
            if value is None:
                raise RuntimeError("No signal value found")
            self.processed.append(f"DrainSignalChannelsFlow process signal value: {value}")

        # Yield so AsyncWorker can serve other Flows during the drain window.
        await asyncio.sleep(DRAIN_WINDOW_SECONDS)

        return force_complete_if_channels_empty(None, StepMovement.of(ProcessSignal, None), self.queue_signal_channel)


class DrainSignalChannelsFlow(Flow[str]):
    QUEUE_SIGNAL_CHANNEL = "queueSignalChannel"

    queue_signal_channel = Channel(QUEUE_SIGNAL_CHANNEL, str)

    def __init__(self) -> None:
        self.processed: list[str] = []  # the example prints each; kept here to check
        self.process_signal = ProcessSignal(self.queue_signal_channel, self.processed)

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.process_signal)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.queue_signal_channel)

    @rpc
    def signal(self, context: Context, value: str) -> RPCResult[None]:
        """SDK 1.23 has no client-side publish: the controller publishes through this RPC."""
        self.queue_signal_channel.publish(context, value)
        return RPCResult(None)


async def start_or_signal(client: AsyncClient, flow: DrainSignalChannelsFlow, flow_id: str) -> str:
    """controller.py's /startorsignal."""
    try:
        await client.invoke_rpc(flow.signal, flow_id, "signal from startorsignal endpoint")
    except FlowNotActiveOrNotFoundError:
        run_id = await client.start_flow(flow, flow_id, "first message from start", START)
        return f"Started the workflow with runId {run_id}"
    return "Signaled the workflow"


def test_drain_signal_processes_the_start_message_then_each_signal_one_at_a_time_then_completes() -> None:
    with DexTestEnv() as env:
        flow = DrainSignalChannelsFlow()

        async def user(client: AsyncClient) -> list[str]:
            said = [await start_or_signal(client, flow, "drain")]
            for _ in range(2):  # both inside the first drain window
                await asyncio.sleep(5)
                said.append(await start_or_signal(client, flow, "drain"))
            await client.wait_for_flow("drain", timedelta(minutes=5))
            return said

        said = serve(env, user)
        assert said[0].startswith("Started the workflow with runId ")
        assert said[1:] == ["Signaled the workflow", "Signaled the workflow"]
        assert flow.processed == [
            "DrainSignalChannelsFlow process signal value: first message from start",
            "DrainSignalChannelsFlow process signal value: signal from startorsignal endpoint",
            "DrainSignalChannelsFlow process signal value: signal from startorsignal endpoint",
        ]
        result = env.result("drain")
        assert result.status is FlowStatus.COMPLETED
        steps = env.inspect("drain")["steps"]
        assert [[a["method"] for a in s["attempts"]] for s in steps] == [["WAIT_FOR", "EXECUTE"]] * 3  # no retry
        assert _seconds(env.inspect("drain")["summary"]["closeTime"]) - _seconds(
            env.inspect("drain")["summary"]["startTime"]) == pytest.approx(3 * DRAIN_WINDOW_SECONDS, abs=1)
        assert check_flow(env.store, env.store.get_flow("drain")) == []
