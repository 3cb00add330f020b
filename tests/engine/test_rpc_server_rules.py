"""RPCs as the Dex server runs them (issue 23, rules 12, 13 and 15), in virtual time: an RPC
holding locks whose handler raises is run again, up to 3 attempts on one snapshot (one without
locks runs once); an RPC's timeout is capped at the server's 60 s; an RPC with no locks and no
effects records no history event (the server sends the flow no signal)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from dexcli import AsyncClient, Attribute, Context, PersistenceSchema, RPCResult, rpc
from dexcli.engine.clock import run as run_on_clock
from dexcli.sdk.errors import WorkerInvocationError
from dexcli.testing import DexTestEnv
from dexcli_flows.approval import ApprovalFlow, Request

tally = Attribute("tally", int)


class Rpcs(ApprovalFlow):
    """The approval flow (it waits for a decision) with RPCs that fail, take long, or read."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__()
        self.failures = failures
        self.seen: list[int] = []  # the tally each attempt read

    def get_flow_type(self) -> str:
        return "ApprovalFlow"

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(*super().get_persistence_schema().all(), tally)

    def _flaky(self, context: Context) -> RPCResult[int]:
        self.seen.append(tally.get(context))
        tally.set(context, tally.get(context) + 1)  # staged; a failed attempt's write is dropped
        if len(self.seen) <= self.failures:
            raise RuntimeError(f"attempt {len(self.seen)} failed")
        return RPCResult(tally.get(context))

    @rpc(lock_attributes=(tally.lock(),))
    def locked_bump(self, context: Context) -> RPCResult[int]:
        return self._flaky(context)

    @rpc
    def bump(self, context: Context) -> RPCResult[int]:
        return self._flaky(context)

    @rpc(timeout=timedelta(seconds=120))
    async def slow(self, context: Context) -> RPCResult[str]:
        await asyncio.sleep(90)
        return RPCResult("done")

    @rpc(lock_attributes=(tally.lock(),))
    def locked_read(self, context: Context) -> RPCResult[int]:
        return RPCResult(tally.get(context))


def _start(env: DexTestEnv, flow: Rpcs) -> None:
    env.start(flow, Request("Laptop", 1200), "a")
    env.drive(["a"], until=lambda: env.inspect("a")["steps"][0]["status"] == "WAITING")


def _rpc_events(env: DexTestEnv) -> list[dict[str, Any]]:
    return [e for e in env.inspect("a")["history"] if e["type"] == "RpcExecutionCompleted"]


def _tally(env: DexTestEnv) -> Any:
    return env.store.read(lambda tx: dict((k, v) for k, _, _, v in tx.attribute_values("a"))).get("tally")


def test_a_locking_rpc_that_raises_twice_succeeds_on_its_third_attempt() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs(failures=2)
        _start(env, flow)
        assert env.client.invoke_rpc(flow.locked_bump, "a") == 1
        assert flow.seen == [0, 0, 0]  # every attempt read the same snapshot; failed writes were dropped
        assert _tally(env) == "1"
        assert len(_rpc_events(env)) == 1


def test_a_locking_rpc_gives_up_after_three_attempts_and_frees_its_lock() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs(failures=5)
        _start(env, flow)
        with pytest.raises(WorkerInvocationError, match="attempt 3 failed"):
            env.client.invoke_rpc(flow.locked_bump, "a")
        assert flow.seen == [0, 0, 0]
        assert _tally(env) is None and _rpc_events(env) == []
        assert env.store.read(lambda tx: tx.lock_holder("a", "tally", env.clock.now())) is None


def test_an_rpc_without_locks_runs_once() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs(failures=1)
        _start(env, flow)
        with pytest.raises(WorkerInvocationError, match="attempt 1 failed"):
            env.client.invoke_rpc(flow.bump, "a")
        assert flow.seen == [0]


def test_a_locking_rpc_on_the_engines_loop_is_retried_in_virtual_time() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs(failures=2)
        _start(env, flow)
        client = AsyncClient(engine=env.engine)

        async def scenario() -> tuple[int, float]:
            began = env.clock.now()
            out = await client.invoke_rpc(flow.locked_bump, "a")
            return out, env.clock.now() - began

        out, took = run_on_clock(scenario, env.clock)
        assert out == 1 and flow.seen == [0, 0, 0]
        assert took == pytest.approx(0.3)  # the server's local-activity backoff: 0.1 s, then 0.2 s


def test_an_rpc_timeout_above_60_s_is_capped_at_60_s() -> None:
    """`@rpc(timeout=120 s)` whose handler takes 90 s: the server's budget ends it at 60 s."""
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs()
        _start(env, flow)
        client = AsyncClient(engine=env.engine)

        async def scenario() -> float:
            began = env.clock.now()
            drive = asyncio.create_task(env.engine.drive_async(["a"], until=lambda: False, poll=1.0, release=False))
            try:
                with pytest.raises(WorkerInvocationError, match="within 60 s"):
                    await client.invoke_rpc(flow.slow, "a")
                return env.clock.now() - began
            finally:
                drive.cancel()

        assert run_on_clock(scenario, env.clock) == pytest.approx(60.0)


def test_an_rpc_without_locks_or_effects_records_no_history_event() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = Rpcs()
        _start(env, flow)
        before = len(env.inspect("a")["history"])
        assert env.client.invoke_rpc(flow.pending, "a") == 0
        assert env.client.invoke_rpc(flow.pending, "a") == 0
        assert len(env.inspect("a")["history"]) == before
        # a locking RPC goes to the flow as an update even without effects: it is recorded
        assert env.client.invoke_rpc(flow.locked_read, "a") == 0
        assert [e["rpcName"] for e in _rpc_events(env)] == ["locked_read"]
