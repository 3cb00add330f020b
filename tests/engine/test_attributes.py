"""Attributes and locks in virtual time: snapshot reads, staged writes that commit with the
result (or not at all), locks that lose no update between steps and RPCs, and what happens
without a lock (lost updates: the reason locks exist)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from dexcli import AsyncClient
from dexcli.engine.clock import run as run_on_clock
from dexcli.sdk.errors import RpcLockConflictError, WorkerInvocationError
from dexcli.testing import DexTestEnv
from tests.engine.attribute_flows import CounterFlow, RetryFlow


def outcomes_of(env: DexTestEnv, flow_id: str) -> list[str]:
    return [a["outcome"] for s in env.inspect(flow_id)["steps"] for a in s["attempts"]]


def _attrs(env: DexTestEnv, flow_id: str) -> dict[str, Any]:
    return {k: json.loads(v) for k, _, _, v in env.store.read(lambda tx: tx.attribute_values(flow_id))}


def test_without_a_lock_concurrent_read_modify_writes_lose_updates() -> None:
    with DexTestEnv(start=0.0) as env:
        env.run(CounterFlow(), [5, 5, 5, 5], "f")
        # four increments read 0 from their snapshots at the same time; the last writer wins
        assert _attrs(env, "f")["counter"] == 1


def test_with_a_lock_steps_queue_and_no_update_is_lost() -> None:
    with DexTestEnv(start=0.0) as env:
        env.run(CounterFlow(), [-1] * 10, "f")
        assert _attrs(env, "f")["counter"] == 10
        assert env.clock.now() >= 10  # one at a time: each held the lock for its whole attempt


def test_a_step_waiting_on_a_lock_shows_the_key_it_waits_for() -> None:
    with DexTestEnv(start=0.0) as env:
        env.start(CounterFlow(), [-100, -1], "f")
        seen: dict[str, Any] = {}

        def at_50() -> bool:  # looked at while the drive runs (it releases what it leaves)
            if env.clock.now() < 50:
                return False
            seen["steps"] = {s.step_execution_id: s for s in env.store.steps_of("f")}
            seen["holder"] = env.store.read(lambda tx: tx.lock_holder("f", "counter", env.clock.now()))
            return True

        env.drive(["f"], until=at_50)
        steps, holder = seen["steps"], seen["holder"]
        waiting = [s for s in steps.values() if s.lock_wait == "counter"]
        assert len(waiting) == 1 and waiting[0].status.value == "QUEUED"
        assert holder in steps and steps[holder].status.value == "RUNNING"


def test_an_rpc_whose_lock_is_held_fails_at_once() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = CounterFlow()
        env.start(flow, [-100], "f")
        seen: dict[str, Any] = {}

        def at_10() -> bool:  # while LockedIncrement holds the lock (the drive releases it as it ends)
            if env.clock.now() < 10:
                return False
            with pytest.raises(RpcLockConflictError, match="counter"):
                env.client.invoke_rpc(flow.bump, "f")
            seen["read"] = env.client.invoke_rpc(flow.read, "f")
            return True

        env.drive(["f"], until=at_10)
        assert seen["read"] == 0  # unlocked reads are not refused


def _outcomes_of_step(env: DexTestEnv, flow_id: str, seid: str) -> list[str]:
    return [a["outcome"] for s in env.inspect(flow_id)["steps"] if s["stepExecutionId"] == seid
            for a in s["attempts"]]


def test_an_interrupted_attempt_keeps_the_lock_until_its_method_call_ends() -> None:
    """A step holds its lock for its whole method call, as on a Dex server: a clean stop
    (Ctrl-C) ends the attempt INTERRUPTED but not the call, so an RPC still meets the lock
    until the step's next attempt completes; then it gets in."""
    with DexTestEnv(start=0.0) as env:
        flow = CounterFlow()
        env.start(flow, [-30, 0], "f")  # 0: Hold keeps the flow open for the RPC after
        conflicts: list[str] = []

        def at_10() -> bool:  # LockedIncrement holds the lock
            if env.clock.now() < 10:
                return False
            with pytest.raises(RpcLockConflictError, match="counter") as e:
                env.client.invoke_rpc(flow.bump, "f")
            conflicts.append(str(e.value))
            return True

        env.drive(["f"], until=at_10)  # as it ends, the drive releases the attempt (a clean stop)
        assert conflicts and env.engine.release() == 0
        assert _outcomes_of_step(env, "f", "LockedIncrement-1") == ["INTERRUPTED"]
        assert env.store.read(lambda tx: tx.lock_holder("f", "counter", env.clock.now())) == "LockedIncrement-1"
        with pytest.raises(RpcLockConflictError, match="LockedIncrement-1"):
            env.client.invoke_rpc(flow.bump, "f")

        env.drive(["f"], until=lambda: _outcomes_of_step(env, "f", "LockedIncrement-1")[-1] == "COMPLETED")
        assert env.store.read(lambda tx: tx.lock_holder("f", "counter", env.clock.now())) is None
        assert env.client.invoke_rpc(flow.bump, "f") == 2


def test_steps_and_rpcs_sharing_a_lock_lose_no_update() -> None:
    """25 locked steps and 25 RPCs (retrying on RpcLockConflictError) on one counter: 50."""
    with DexTestEnv(start=0.0) as env:
        flow = CounterFlow()
        env.start(flow, [-1] * 25 + [0], "f")
        client = AsyncClient(engine=env.engine)
        conflicts = 0

        async def bumps() -> None:
            nonlocal conflicts
            done = 0
            while done < 25:
                try:
                    await client.invoke_rpc(flow.bump, "f")
                    done += 1
                except RpcLockConflictError:
                    conflicts += 1
                await asyncio.sleep(0.4)
            await client.invoke_rpc(flow.release, "f")

        async def scenario() -> None:
            def closed() -> bool:
                return (row := env.engine.store.get_flow("f")) is None or not row.is_running

            drive = asyncio.create_task(env.engine.drive_async(["f"], until=closed, poll=0.5, release=False))
            await bumps()
            await drive

        run_on_clock(scenario, env.clock)
        assert env.result("f").completions[-1].output == 50  # Hold read the counter last
        assert _attrs(env, "f")["counter"] == 50
        assert conflicts > 0  # the RPCs did meet the steps' lock


def test_writes_commit_with_the_result_and_rpcs_read_their_own_writes() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = CounterFlow()
        env.start(flow, [-1000], "f")
        env.drive(["f"], until=lambda: env.clock.now() >= 1)
        assert _attrs(env, "f")["status"] == "counting"
        assert env.client.invoke_rpc(flow.finish, "f") == "done"
        assert _attrs(env, "f")["status"] == "done"
        rows = env.store.read(lambda tx: tx.c.execute(
            "SELECT key, text FROM search_attributes WHERE flow_id = 'f'").fetchall())
        assert rows == [("OrderStatus", "done")]
        history = [e for e in env.inspect("f")["history"] if e["type"] == "RpcExecutionCompleted"]
        assert history[-1]["upsertAttributes"] == {"status": "done"}


def test_an_attribute_map_not_loaded_is_refused_as_on_a_server() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = CounterFlow()
        env.start(flow, [-1000], "f")
        env.drive(["f"], until=lambda: env.clock.now() >= 1)
        assert _attrs(env, "f")["notes/fan"] == "1 increments"
        with pytest.raises(WorkerInvocationError) as err:
            env.client.invoke_rpc(flow.note, "f", "fan")
        assert err.value.worker_error_type.endswith("AttributeMapNotLoadedError")


def test_a_failed_attempts_staged_writes_are_discarded() -> None:
    with DexTestEnv(start=0.0) as env:
        result = env.run(RetryFlow(), 5, "f")
        assert result.single_output() == 0  # the second attempt did not see the first's 99
        assert _attrs(env, "f")["counter"] == 5
