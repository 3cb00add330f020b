"""Flows without a start step (`StepList.without_start_step`), as SDK 1.23 registers them and a Dex
server runs them (interpreter/workflowImpl.go: "it's possible that a flow is started without any
starting step; it will wait for a new step coming in (by RPC results)"): the start creates the
flow RUNNING with no step; RPCs answer; an RPC's next steps run; a stop or the flow timeout
ends it. In virtual time."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dexcli import (
    Attribute,
    Context,
    Flow,
    FlowStatus,
    PersistenceSchema,
    Registry,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    ValueMappingError,
    dead_end,
    graceful_complete,
    rpc,
)
from dexcli.engine.doctor import check_flow
from dexcli.sdk.results import StartFlowOptions
from dexcli.testing import DexTestEnv


class Push(Step[str]):
    def __init__(self) -> None:
        self.pushed: list[str] = []

    def execute(self, context: Context, input: str) -> StepDecision:
        self.pushed.append(input)
        return dead_end()


class Finish(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("finished")


class Board(Flow[None]):
    title = Attribute("Title", str)

    def __init__(self) -> None:
        self.push, self.finish = Push(), Finish()

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(self.push, self.finish)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.title)

    @rpc
    def get(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.title.get(context))

    @rpc
    def update(self, context: Context, title: str) -> RPCResult[None]:
        self.title.set(context, title)
        return RPCResult(None, next_steps=(StepMovement.of(Push, title),))

    @rpc
    def close(self, context: Context) -> RPCResult[None]:
        return RPCResult(None, next_steps=(StepMovement.of(Finish, None),))


def test_a_flow_without_a_start_step_registers():
    definition = Registry([Board()]).get("Board")
    assert definition is not None and definition.start_step is None
    assert set(definition.steps) == {"Push", "Finish"}


def test_it_starts_running_with_no_step_and_stays_so_while_driven(env: DexTestEnv):
    env.start(Board(), None, "j")
    env.drive(["j"])  # nothing to run: the drive ends, the flow does not
    view = env.inspect("j")
    assert view["summary"]["flowStatus"] == "RUNNING"
    assert view["steps"] == [] and view["state"]["activeStepExecutions"] == []
    started = view["history"][0]
    assert started["type"] == "FlowStarted" and "startStepType" not in started and started["input"] is None
    assert check_flow(env.store, env.store.get_flow("j")) == []  # an idle flow is no breach


def test_rpcs_answer_and_their_next_steps_run(env: DexTestEnv):
    flow = Board()
    env.start(flow, None, "j")
    assert env.client.invoke_rpc(flow.get, "j") is None
    env.client.invoke_rpc(flow.update, "j", "Engineer")
    env.drive(["j"])
    assert flow.push.pushed == ["Engineer"]
    assert env.client.invoke_rpc(flow.get, "j") == "Engineer"
    assert env.inspect("j")["summary"]["flowStatus"] == "RUNNING"  # Push dead-ended: idle again
    env.client.invoke_rpc(flow.close, "j")
    result = env.client.wait_for_flow("j")
    assert result.status is FlowStatus.COMPLETED and result.single_output(str) == "finished"
    assert check_flow(env.store, env.store.get_flow("j")) == []  # the RPC-started steps are accounted for


def test_a_stop_ends_it(env: DexTestEnv):
    env.start(Board(), None, "j")
    env.client.stop_flow("j")
    assert env.result("j").status is FlowStatus.CANCELED


def test_its_flow_timeout_ends_it(env: DexTestEnv):
    env.client.start_flow(Board(), "j", None, StartFlowOptions(timeout=timedelta(hours=24)))
    result = env.client.wait_for_flow("j")
    assert result.status is FlowStatus.FAILED and result.error_message == "Flow timed out after 86400 seconds"
    closed = env.store.get_flow("j")
    assert closed is not None and closed.close_time is not None and closed.start_time is not None
    assert closed.close_time - closed.start_time == pytest.approx(24 * 3600, abs=1)


def test_a_start_input_is_refused_as_the_official_client_refuses_it(env: DexTestEnv):
    with pytest.raises(ValueMappingError, match="Board has no start step: its start input must be None"):
        env.start(Board(), "a title", "j")
    assert env.store.get_flow("j") is None


class Nothing(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.empty()


def test_a_flow_with_no_steps_at_all_starts_idle_too(env: DexTestEnv):
    env.start(Nothing(), None, "n")
    env.drive(["n"])
    assert env.inspect("n")["summary"]["flowStatus"] == "RUNNING"
