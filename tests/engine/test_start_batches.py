"""AsyncClient starts of one loop pass are one batch (dexcli.engine.start_batch): written
together in one transaction, in their order, each caller with its own outcome."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from dexcli import AsyncClient, FlowAlreadyStartedError, FlowStatus, IdReusePolicy, StartFlowOptions
from dexcli.engine.batch import Unit
from dexcli.engine.clock import run as run_on_clock
from dexcli.store import Tx
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_helpers import history_types, step_ids

FLOW = ThreeStepFlow()


def _together(env: DexTestEnv, *calls: Callable[[AsyncClient], Awaitable[Any]]) -> tuple[list[Any], int]:
    """Run the calls in one gather (one loop pass, one batch); their outcomes and the commits."""
    client = AsyncClient(engine=env.engine)
    before = env.store.commits

    async def go() -> list[Any]:
        return await asyncio.gather(*(call(client) for call in calls), return_exceptions=True)

    got = run_on_clock(go, env.clock)
    return got, env.store.commits - before


def _start(flow_id: str, n: int, options: StartFlowOptions | None = None) -> Callable[[AsyncClient], Awaitable[Any]]:
    return lambda client: client.start_flow(FLOW, flow_id, n, options)


def _num(env: DexTestEnv, flow_id: str) -> int:
    return int(env.store._conn.execute("SELECT num FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()[0])


def test_a_second_start_of_one_id_in_a_batch_is_refused_alone(env: DexTestEnv) -> None:
    got, commits = _together(env, _start("a", 1), _start("x", 2), _start("b", 3), _start("x", 4), _start("c", 5))
    assert commits == 1
    assert isinstance(got[3], FlowAlreadyStartedError)
    assert all(isinstance(r, str) for i, r in enumerate(got) if i != 3) and len(set(got) - {got[3]}) == 4
    assert env.store.get_flow("x").run_id == got[1]  # type: ignore[union-attr]
    # the batch keeps the order of its starts: the flows are numbered as they were asked for
    assert [_num(env, f) for f in ("a", "x", "b", "c")] == [1, 2, 3, 4]
    env.drive()
    assert [env.result(f).single_output(int) for f in ("a", "x", "b", "c")] == [7, 9, 11, 15]


def test_a_second_start_of_one_id_with_its_request_id_is_answered_with_the_first_run(env: DexTestEnv) -> None:
    same = StartFlowOptions(request_id="r1", ignore_already_started=True)
    other = StartFlowOptions(request_id="r2", ignore_already_started=True)
    got, commits = _together(env, _start("x", 1, same), _start("x", 2, same), _start("x", 3, other))
    assert commits == 1
    assert got[0] == got[1] and isinstance(got[2], FlowAlreadyStartedError)
    assert history_types(env, "x") == ["FlowStarted"] and step_ids(env, "x") == ["First-1"]


def test_a_second_start_of_one_id_that_may_terminate_the_first_replaces_it_in_the_batch(env: DexTestEnv) -> None:
    terminate = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_TERMINATE_IF_RUNNING)
    got, commits = _together(env, _start("x", 1), _start("y", 2), _start("x", 5, terminate))
    assert commits == 1 and all(isinstance(r, str) for r in got)
    old = env.inspect(f"x${got[0]}")
    assert old["summary"]["flowStatus"] == "TERMINATED" and got[2] in old["summary"]["errorMessage"]
    assert env.store.get_flow("x").run_id == got[2]  # type: ignore[union-attr]
    env.drive()
    assert env.result("x").single_output(int) == 15 and env.result("y").single_output(int) == 9


def test_a_start_of_an_id_already_in_the_database_is_refused_beside_new_ones(env: DexTestEnv) -> None:
    first, _ = _together(env, _start("x", 1))
    got, commits = _together(env, _start("a", 1), _start("x", 2), _start("b", 3))
    assert commits == 1 and isinstance(got[1], FlowAlreadyStartedError)
    assert env.store.get_flow("x").run_id == first[0]  # type: ignore[union-attr]
    assert env.store.get_flow("a") is not None and env.store.get_flow("b") is not None


def test_a_start_whose_write_fails_fails_alone_and_the_others_commit(env: DexTestEnv,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """b's FlowStarted cannot be written: the batch's shared statements fail, its starts are
    applied again one by one, and only b's caller gets the error; a and c commit, in order."""
    boom = RuntimeError("disk full (simulated)")
    add_event, add_events = Tx.add_event, Tx.add_events

    def failing_event(self: Tx, flow_id: str, *args: Any) -> None:
        if flow_id == "b":
            raise boom
        add_event(self, flow_id, *args)

    def failing_events(self: Tx, events: list[tuple[str, float, str, str]]) -> None:
        if any(e[0] == "b" for e in events):
            raise boom
        add_events(self, events)

    monkeypatch.setattr(Tx, "add_event", failing_event)
    monkeypatch.setattr(Tx, "add_events", failing_events)
    got, commits = _together(env, _start("a", 1), _start("b", 2), _start("c", 3))
    assert commits == 1
    assert isinstance(got[0], str) and got[1] is boom and isinstance(got[2], str)
    assert env.store.get_flow("b") is None  # nothing of it stays: no flow row, no step
    assert env.store._conn.execute("SELECT COUNT(*) FROM steps WHERE flow_id = 'b'").fetchone()[0] == 0
    assert _num(env, "a") < _num(env, "c")
    monkeypatch.undo()
    env.drive()
    assert env.result("a").single_output(int) == 7 and env.result("c").single_output(int) == 11


def test_a_batch_that_cannot_be_applied_fails_its_starts_and_not_the_other_writes(
        env: DexTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    boom = RuntimeError("no such table (simulated)")

    def failing(self: Tx, flow_ids: list[str]) -> set[str]:
        raise boom

    monkeypatch.setattr(Tx, "taken_flow_ids", failing)
    written: list[bool] = []

    async def other_write(client: AsyncClient) -> None:
        await env.engine._commits.submit(Unit(lambda tx: tx.kv_put("t", "k", 1), lambda _: written.append(True)))

    got, commits = _together(env, _start("a", 1), other_write, _start("b", 2))
    assert got[0] is boom and got[2] is boom and got[1] is None and written == [True]
    assert commits == 1 and env.store.get_flow("a") is None and env.store.get_flow("b") is None


def test_a_write_queued_between_two_starts_sees_the_first_and_not_the_second(env: DexTestEnv) -> None:
    """A batch takes only starts that come right after it in the pass's queue: the order of
    the writes in the transaction is the order they were asked for."""
    seen: list[tuple[bool, bool]] = []

    async def look(client: AsyncClient) -> None:
        await env.engine._commits.submit(Unit(
            lambda tx: seen.append((tx.get_flow("a") is not None, tx.get_flow("b") is not None))))

    got, commits = _together(env, _start("a", 1), look, _start("b", 2))
    assert commits == 1 and seen == [(True, False)] and isinstance(got[2], str)


def test_a_start_cancelled_before_its_commit_is_not_written(env: DexTestEnv) -> None:
    client = AsyncClient(engine=env.engine)

    async def go() -> list[Any]:
        tasks = [asyncio.ensure_future(client.start_flow(FLOW, f, 1)) for f in ("a", "b", "c")]

        await asyncio.sleep(0)  # each start has run up to its wait for the commit
        assert len(env.engine._commits._queue) == 1  # one batch, not flushed yet
        tasks[1].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    got = run_on_clock(go, env.clock)
    assert isinstance(got[1], asyncio.CancelledError) and isinstance(got[0], str) and isinstance(got[2], str)
    assert env.store.get_flow("b") is None
    env.drive()
    assert env.result("a").status is FlowStatus.COMPLETED


def test_the_collector_is_paused_while_a_batch_is_written_and_on_again_after(env: DexTestEnv,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    add_events = Tx.add_events
    seen: list[bool] = []

    def looking(self: Tx, events: list[tuple[str, float, str, str]]) -> None:
        seen.append(gc.isenabled())
        add_events(self, events)

    monkeypatch.setattr(Tx, "add_events", looking)
    assert gc.isenabled()
    got, _ = _together(env, _start("a", 1), _start("b", 2))
    assert seen == [False] and gc.isenabled() and all(isinstance(r, str) for r in got)

    def failing(self: Tx, flow_ids: list[str]) -> set[str]:
        raise RuntimeError("simulated")

    monkeypatch.setattr(Tx, "taken_flow_ids", failing)
    got, _ = _together(env, _start("c", 1), _start("d", 2))
    assert all(isinstance(r, RuntimeError) for r in got) and gc.isenabled()


def test_the_collector_is_on_again_after_a_keyboard_interrupt_in_the_batch_s_commit(
        env: DexTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt in the group commit's COMMIT goes out of the loop, which is closed
    without running again: the collector the batch paused is on all the same."""
    commit = type(env.store)._commit
    seen: list[bool] = []

    def interrupted(self: Any) -> None:
        seen.append(gc.isenabled())
        raise KeyboardInterrupt

    monkeypatch.setattr(type(env.store), "_commit", interrupted)
    client = AsyncClient(engine=env.engine)

    async def go() -> list[Any]:
        return await asyncio.gather(client.start_flow(FLOW, "a", 1), client.start_flow(FLOW, "b", 2))

    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(go())
        loop.close()  # not run again: nothing queued on it gets to run
        assert seen == [False] and gc.isenabled()
    finally:
        gc.enable()
        monkeypatch.setattr(type(env.store), "_commit", commit)
        env.store._conn.execute("ROLLBACK")  # the COMMIT never ran
    assert env.store.get_flow("a") is None


def test_a_unit_s_ended_runs_when_another_unit_of_its_flush_raises_a_base_exception(env: DexTestEnv) -> None:
    ended: list[str] = []

    def interrupt(tx: Tx) -> None:
        raise KeyboardInterrupt

    commits = env.engine._commits
    loop = asyncio.new_event_loop()
    try:
        async def go() -> None:
            commits.queue(Unit(lambda tx: None, ended=lambda: ended.append("first")))
            commits.queue(Unit(interrupt, ended=lambda: ended.append("second")))
            commits.flush()

        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(go())
    finally:
        loop.close()
    assert ended == ["first", "second"]
