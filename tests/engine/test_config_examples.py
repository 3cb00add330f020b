"""Dex's own example of FlowConfig (superdurable/dex, examples/python: primitives/flow), ported to
SDK 1.23 — imports from dexcli, `go_to` given Step classes — and driven the way its controller
drives it. In virtual time. products/job-post, whose controller starts each posting with
`FlowConfig(continue_as_new_threshold=10)`, is ported in test_rpc_and_drain_examples.py.

The example's `example_start_flow_options()` (the flow-options page's snippet) runs as given,
its flow-level `retry_policy` too (dexcli.engine.transitions.flow_retry). What the port leaves
out, and why: its `reroute_active_flow` names a `WorkerTarget`, which dex does not define (a
stand-in object shows dex refusing it loudly)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dexcli import (
    Attribute,
    Channel,
    Context,
    Flow,
    FlowConfig,
    FlowStatus,
    FlowTimeoutPolicy,
    IdReusePolicy,
    PersistenceSchema,
    RetryPolicy,
    RPCResult,
    StartFlowOptions,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    Wait,
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


def example_start_flow_options() -> StartFlowOptions:  # controller.py, as the flow-options page shows it
    return StartFlowOptions(
        timeout=timedelta(minutes=30),
        timeout_policy=FlowTimeoutPolicy.HANDLER,
        start_delay=timedelta(minutes=5),
        id_reuse_policy=IdReusePolicy.DISALLOW,
        retry_policy=RetryPolicy(
            initial_interval=timedelta(minutes=1),
            backoff_coefficient=2,
            maximum_interval=timedelta(minutes=10),
            maximum_attempts=3,
        ),
        config_override=FlowConfig(step_durability=StepDurability.SYNC),
        ignore_already_started=True,
        request_id="start-order-123",
    ).with_attribute(status, "queued")


def test_flow_primitive_example_options_start_the_flow_with_its_flow_retry_policy() -> None:
    options = example_start_flow_options()
    with DexTestEnv() as env:
        first = env.client.start_flow(ExampleFlow(), "order-123", 1, options)
        assert env.client.start_flow(ExampleFlow(), "order-123", 1, options) == first  # the same request
        summary = env.inspect("order-123")["summary"]
        assert summary["flowRetry"] == {"attempt": 1, "firstRunId": first, "retryPolicy": {
            "initialInterval": 60, "backoffCoefficient": 2, "maximumInterval": 600,
            "maximumAttempts": 3}}
        assert env.inspect("order-123")["state"]["attributes"] == {"status": "queued"}
        assert env.client.wait_for_flow("order-123").single_output(int) == 3
        assert len(env.inspect("order-123")["runs"]) == 1  # it completed: nothing to retry


class StuckStep(Step[int]):
    """The example flow's step, waiting past the example's 30-minute timeout."""

    def wait_for(self, context: Context, input: int) -> Wait:
        status.set(context, "running")
        return Wait.until(notify.for_one())

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class StuckExampleFlow(ExampleFlow):
    def __init__(self) -> None:
        super().__init__()
        self.example = StuckStep()  # type: ignore[assignment]


def test_flow_primitive_example_options_retry_a_run_its_timeout_handler_fails() -> None:
    with DexTestEnv(start=0.0) as env:
        env.client.start_flow(StuckExampleFlow(), "order-123", 1, example_start_flow_options())
        result = env.client.wait_for_flow("order-123")  # three runs, each timed out and failed by its handler
        assert result.status is FlowStatus.FAILED and result.error_message == "processing deadline reached"
        runs = env.inspect("order-123")["runs"]
        assert [r["status"] for r in runs] == ["FAILED"] * 3 and [r["via"] for r in runs] == [None, "flowRetry",
                                                                                                "flowRetry"]
        # the first run begins after its 5-minute start delay and times out 30 minutes later; each
        # retry begins after its backoff (1 min, then 2) and gets a fresh 30 minutes
        closes = [env.store.get_flow(r["flowId"]).close_time for r in runs]  # type: ignore[union-attr]
        assert closes == [35 * 60, 66 * 60, 98 * 60]
        assert env.inspect("order-123")["state"]["attributes"] == {"status": "timed out"}
