"""RPCs in virtual time: an RPC's publish wakes a waiting step; a handler that raises leaves
nothing behind; a closed or missing flow is refused; skip_timer makes has_timer_fired true."""

from __future__ import annotations

import pytest

from dexcli import Context, RPCResult, StepExecutionId, TimerId, rpc
from dexcli.sdk.errors import FlowNotActiveOrNotFoundError, WorkerInvocationError
from dexcli.testing import DexTestEnv
from dexcli_flows.approval import ApprovalFlow, Request, Verdict, decisions


class Raising(ApprovalFlow):
    def get_flow_type(self) -> str:
        return "ApprovalFlow"

    @rpc
    def broken(self, context: Context, by: str) -> RPCResult[str]:
        decisions.publish(context, Verdict(True, by))  # staged, then discarded
        raise ValueError(f"no approver called {by}")


def _start(env: DexTestEnv, flow: ApprovalFlow, flow_id: str = "a") -> None:
    env.start(flow, Request("Laptop", 1200), flow_id)
    env.drive([flow_id], until=lambda: env.inspect(flow_id)["steps"][0]["status"] == "WAITING")


def test_an_rpc_publish_wakes_the_waiting_step() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = ApprovalFlow()
        _start(env, flow)
        assert env.client.invoke_rpc(flow.pending, "a") == 0
        assert env.client.invoke_rpc(flow.approve, "a", "dana") == "approved by dana"
        result = env.client.wait_for_flow("a")
        assert result.single_output() == {"status": "approved", "title": "Laptop", "by": "dana"}
        types = [e["type"] for e in env.inspect("a")["history"]]
        assert types.index("RpcExecutionCompleted") < types.index("StepWaitForCompleted")
        assert env.clock.now() < 3600  # it did not wait for the 24 h timer


def test_a_handler_that_raises_commits_nothing() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Raising()
        _start(env, flow)
        with pytest.raises(WorkerInvocationError) as err:
            env.client.invoke_rpc(flow.broken, "a", "eve")
        assert err.value.worker_error_type == "builtins.ValueError"
        assert "no approver called eve" in err.value.worker_error_detail
        assert env.store.read(lambda tx: tx.pending_messages("a")) == []
        assert "RpcExecutionCompleted" not in [e["type"] for e in env.inspect("a")["history"]]


def test_skip_timer_expires_the_request_now() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = ApprovalFlow()
        _start(env, flow)
        env.client.skip_timer("a", StepExecutionId("AwaitDecision", 1), TimerId.by_condition_id("expire"))
        result = env.client.wait_for_flow("a")
        assert result.single_output()["status"] == "expired"
        assert env.clock.now() < 3600


def test_rpcs_on_missing_or_closed_flows_are_refused() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = ApprovalFlow()
        with pytest.raises(FlowNotActiveOrNotFoundError):
            env.client.invoke_rpc(flow.approve, "nope", "dana")
        _start(env, flow)
        env.client.invoke_rpc(flow.reject, "a", "sam")
        env.client.wait_for_flow("a")
        with pytest.raises(FlowNotActiveOrNotFoundError):
            env.client.invoke_rpc(flow.approve, "a", "dana")
        assert env.client.invoke_rpc(flow.pending, "a") == 0  # read-only: served from the closed run


def test_skip_timer_of_no_such_timer_is_refused() -> None:
    with DexTestEnv(start=0.0) as env:
        _start(env, ApprovalFlow())
        with pytest.raises(FlowNotActiveOrNotFoundError, match="no timer"):
            env.client.skip_timer("a", StepExecutionId("AwaitDecision", 1), TimerId.by_condition_id("nope"))
        with pytest.raises(FlowNotActiveOrNotFoundError, match="does not exist"):
            env.client.skip_timer("a", StepExecutionId("AwaitDecision", 2), TimerId.by_condition_index(0))
