"""When what ASYNC durability leaves open is committed (dexcli.engine.async_commits): by the next
SYNC transition or start (across flows too), after ASYNC_BATCH transitions, when the loop is
idle, before a client is answered, after ASYNC_WINDOW of real time; never by a drive's return
alone. What is durable is read through a second connection, as another process sees it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    Context,
    Flow,
    FlowStatus,
    RPCResult,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepOptions,
    dead_end,
    go_to,
    graceful_complete,
    rpc,
)
from dexcli.engine import async_commits
from dexcli.testing import DexTestEnv

ASYNC = StepOptions(execute_durability=StepDurability.ASYNC)
SYNC = StepOptions(execute_durability=StepDurability.SYNC)
SEEN: list[tuple[str, dict[str, str]]] = []  # (step, the statuses another connection sees)


@pytest.fixture(autouse=True)
def no_clock_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what each test names commits: the time bound is out of reach (one test sets it)."""
    monkeypatch.setattr(async_commits, "ASYNC_WINDOW", 3600.0)


def durable(db: Path, flow_id: str) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT step_execution_id, status FROM steps WHERE flow_id = ?", (flow_id,)))
    finally:
        conn.close()


def durable_flow(db: Path, flow_id: str) -> str | None:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT status FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()
        return None if row is None else str(row[0])
    finally:
        conn.close()


def mixed_flow(db: Path) -> Flow[int]:
    """A (ASYNC) → B (ASYNC) → C (SYNC) → D (ASYNC): each step notes what is durable as it runs."""

    class Looking(Step[int]):
        opts = ASYNC

        def get_step_options(self) -> StepOptions:
            return self.opts

        def look(self, context: Context) -> None:
            SEEN.append((type(self).__name__, durable(db, context.flow_id)))

    class D(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return graceful_complete(n)

    class C(Looking):
        opts = SYNC

        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(D, n + 1)

    class B(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(C, n + 1)

    class A(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(B, n + 1)

    class Mixed(Flow[int]):
        def get_steps(self) -> StepList[int]:
            return StepList.start_step(A()).other_steps(B(), C(), D())

    return Mixed()


class Loop(Step[int]):
    def get_step_options(self) -> StepOptions:
        return ASYNC

    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(Loop, n + 1) if n < 70 else graceful_complete(n)


class Looping(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Loop())


class Ending(Step[int]):
    def get_step_options(self) -> StepOptions:
        return ASYNC

    def execute(self, context: Context, n: int) -> StepDecision:
        return go_to(Ending, n + 1) if n < 3 else dead_end()  # the flow stays RUNNING


class DeadEnd(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Ending())

    @rpc
    def ping(self, context: Context) -> RPCResult[str]:
        return RPCResult("pong")  # no effects: the RPC itself commits nothing


def test_a_sync_step_after_async_ones_commits_them(tmp_path: Path) -> None:
    SEEN.clear()
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(mixed_flow(db), 1, "f")
        env.drive(["f"])
        assert env.result("f").single_output() == 4
    assert SEEN == [
        ("A", {"A-1": "RUNNING"}),
        ("B", {"A-1": "RUNNING"}),  # A's result is not durable yet: B ran at once
        ("C", {"A-1": "RUNNING"}),  # nor B's
        # C's SYNC result committed A's and B's with it, before D ran
        ("D", {"A-1": "COMPLETED", "B-1": "COMPLETED", "C-1": "COMPLETED", "D-1": "RUNNING"}),
    ]


def test_a_drive_returns_without_committing_and_a_client_answer_commits(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(Looping(), 60, "f")
        env.drive(["f"])  # until idle: the flow has closed, in the open transaction
        assert env.store.deferred > 0
        assert durable_flow(db, "f") == "RUNNING"  # another process still sees it running
        assert durable(db, "f") == {"Loop-1": "RUNNING"}
        result = env.client.wait_for_flow("f")  # the answer is what is durable
        assert result.status is FlowStatus.COMPLETED and result.single_output() == 70
        assert env.store.deferred == 0
        assert durable_flow(db, "f") == "COMPLETED"


def test_wait_for_step_completion_answers_only_when_durable(tmp_path: Path) -> None:
    from dexcli import StepExecutionId, WaitForStepCompletionOptions

    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(DeadEnd(), 1, "f")
        env.drive(["f"])
        assert durable(db, "f") == {"Ending-1": "RUNNING"}
        env.client.wait_for_step_completion("f", StepExecutionId("Ending", 3), WaitForStepCompletionOptions())
        assert durable(db, "f")["Ending-3"] == "COMPLETED"


def test_a_start_commits_the_open_results_of_the_flows_before_it(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        flow = Looping()
        before = env.store.commits
        for i in range(10):  # as `dex run` and the bench: the first attempt leased at start
            env.engine.start_flow(flow, f"f{i}", 68, lease=True)  # three ASYNC transitions each
            env.drive([f"f{i}"])
            assert durable_flow(db, f"f{i}") == "RUNNING"  # its own results are still open
            if i:
                assert durable_flow(db, f"f{i - 1}") == "COMPLETED"  # this start committed them
        assert env.store.commits - before == 10  # one commit per flow: its start's
    assert durable_flow(db, "f9") == "COMPLETED"  # the close commits the last


def test_at_most_async_batch_transitions_are_left_open(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        before = env.store.commits
        env.engine.start_flow(Looping(), "f", 0, lease=True)  # 71 ASYNC transitions
        env.drive(["f"])
        assert env.store.commits - before == 2  # the start's, and the 64th's with the first 64
        assert 0 < env.store.deferred < async_commits.ASYNC_BATCH
        assert durable(db, "f")["Loop-64"] == "COMPLETED"
        assert durable(db, "f")["Loop-65"] == "RUNNING"


def test_an_idle_loop_commits_them(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(Looping(), 60, "f")
        # a drive that goes on once the flow is over: the loop waits with nothing to run
        env.engine.drive(["f"], until=lambda: durable_flow(db, "f") == "COMPLETED", poll=1.0,
                         deadline=env.clock.now() + 60)
        assert env.store.deferred == 0
        assert durable_flow(db, "f") == "COMPLETED"


def test_the_window_commits_them_after_the_drive_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(async_commits, "ASYNC_WINDOW", 0.02)
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(Looping(), 60, "f")
        env.drive(["f"])  # no loop runs after this: the flusher thread keeps the bound
        waited = time.monotonic() + 10
        while env.store.deferred and time.monotonic() < waited:
            time.sleep(0.005)
        assert env.store.deferred == 0
        assert durable_flow(db, "f") == "COMPLETED"


def test_inspect_shows_only_what_is_durable(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        env.start(Looping(), 60, "f")
        env.drive(["f"])
        view: Any = env.inspect("f")
        assert durable_flow(db, "f") == "COMPLETED"  # what it shows was committed first
        assert view is not None


def test_a_late_result_of_a_timed_out_async_attempt_is_refused(tmp_path: Path) -> None:
    """Under ASYNC as under SYNC: attempt 1 passes its StartToClose in its thread; the watchdog
    commits the timeout, attempt 2 completes, and attempt 1's late decision is never applied."""
    import dataclasses

    from tests.engine.test_run_to_completion import Stuck, stuck_beside_a_chain

    stuck = Stuck()
    stuck.options = dataclasses.replace(stuck.options, execute_durability=StepDurability.ASYNC)
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        stuck_beside_a_chain(env, stuck)
        assert len([e for e in env.inspect("a")["history"] if e["type"] == "StepExecuteCompleted"]) == 1
    assert durable_flow(db, "a") == "COMPLETED"


def test_an_async_chain_runs_to_completion_on_one_thread_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """No hop back to the loop per ASYNC step: one handler-thread call runs the whole chain."""
    from dexcli.engine.step_threads import StepThreads

    calls: list[object] = []
    real = StepThreads.call

    def counted(self: StepThreads, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StepThreads, "call", counted)
    with DexTestEnv(tmp_path / "dex.db") as env:
        env.engine.start_flow(Looping(), "f", 50, lease=True)  # 21 ASYNC transitions
        env.drive(["f"])
        assert env.client.wait_for_flow("f").single_output() == 70
    assert len(calls) == 1


def test_an_rpc_answer_is_given_once_what_is_open_is_durable(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        flow = DeadEnd()
        env.start(flow, 1, "f")
        env.drive(["f"])
        assert durable(db, "f") == {"Ending-1": "RUNNING"}
        assert env.client.invoke_rpc(flow.ping, "f") == "pong"
        assert durable(db, "f") == {"Ending-1": "COMPLETED", "Ending-2": "COMPLETED", "Ending-3": "COMPLETED"}
