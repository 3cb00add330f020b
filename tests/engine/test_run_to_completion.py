"""Plain sync steps run to completion on their handler thread (dexcli.engine.sync_attempt):
the thread commits each decision itself and runs the next leased step at once, with SYNC
order kept; a timed-out attempt is committed by the watchdog, its thread replaced, and its
late outcome refused."""

from __future__ import annotations

import asyncio
import contextvars
import sqlite3
import threading
from typing import Any

import pytest

from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete
from dexcli.engine import transitions
from dexcli.engine.step_threads import StepThreads, current_worker
from dexcli.testing import DexTestEnv
from tests.engine.engine_flows import opts

SEEN: list[tuple[str, int, list[tuple[str, str]]]] = []  # (step, thread, steps as another connection sees them)
DB: dict[str, str] = {}


def _committed(flow_id: str) -> list[tuple[str, str]]:
    conn = sqlite3.connect(DB["path"])
    try:
        rows = conn.execute("SELECT step_execution_id, status FROM steps WHERE flow_id = ? ORDER BY 1",
                            (flow_id,)).fetchall()
    finally:
        conn.close()
    return [(str(a), str(b)) for a, b in rows]


class _Seen(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        SEEN.append((type(self).__name__, threading.get_ident(), _committed(context.flow_id)))
        return self.next(input)

    def next(self, n: int) -> StepDecision:
        raise NotImplementedError


class Third(_Seen):
    def next(self, n: int) -> StepDecision:
        return graceful_complete(n + 1)


class Second(_Seen):
    def next(self, n: int) -> StepDecision:
        return go_to(Third, n + 1)


class First(_Seen):
    def next(self, n: int) -> StepDecision:
        return go_to(Second, n + 1)


class Chain(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(First()).other_steps(Second(), Third())


def test_the_next_step_runs_on_the_same_thread_after_its_predecessor_committed() -> None:
    SEEN.clear()
    with DexTestEnv() as env:
        DB["path"] = env.engine.store.path
        drivers: list[Any] = []
        env.engine.events.listeners.append(lambda e: drivers.append(
            env.engine.activity().of(e.flow_id, e.data["stepExecutionId"])) if e.type == "attemptStarted" else None)
        assert env.run(Chain(), 1, "f").single_output(int) == 4
        assert all(d is not None and d.on_thread for d in drivers) and len(drivers) == 3
    assert [name for name, _, _ in SEEN] == ["First", "Second", "Third"]
    assert len({thread for _, thread, _ in SEEN}) == 1  # one thread call ran the whole chain
    # SYNC: each handler runs only once its predecessor's decision is committed (another
    # connection sees it COMPLETED, and its own step leased)
    assert SEEN[1][2] == [("First-1", "COMPLETED"), ("Second-1", "RUNNING")]
    assert SEEN[2][2] == [("First-1", "COMPLETED"), ("Second-1", "COMPLETED"), ("Third-1", "RUNNING")]
    # the events in their order: each step's completion before its successor's start
    order = [(e["type"], e.get("stepExecutionId")) for e in env.events
             if e["type"] in ("attemptStarted", "stepCompleted", "flowClosed")]
    assert order == [("attemptStarted", "First-1"), ("stepCompleted", "First-1"),
                     ("attemptStarted", "Second-1"), ("stepCompleted", "Second-1"),
                     ("attemptStarted", "Third-1"), ("stepCompleted", "Third-1"), ("flowClosed", None)]


class Stuck(Step[int]):
    """Attempt 1 passes its StartToClose in its thread and stays there until its timeout is
    committed and the other flow has finished; then it returns a decision (too late)."""

    def __init__(self) -> None:
        self.options = opts(timeout=20, attempts=2, initial=1)
        self.timed_out = threading.Event()
        self.other_done = threading.Event()
        self.clock: Any = None
        self.threads: list[int] = []

    def get_step_options(self) -> Any:
        return self.options

    def execute(self, context: Context, input: int) -> StepDecision:
        self.threads.append(threading.get_ident())
        if context.attempt == 1:
            self.clock.advance(100)  # past its deadline while it runs
            assert self.timed_out.wait(30) and self.other_done.wait(30)
            return graceful_complete(1000)  # refused: its attempt has ended
        return graceful_complete(input + context.attempt)


class StuckFlow(Flow[int]):
    def __init__(self, step: Stuck) -> None:
        self.step = step

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


def stuck_beside_a_chain(env: DexTestEnv, stuck: Stuck) -> dict[str, Any]:
    """Flow "a" (a Stuck step: attempt 1 passes its StartToClose in its thread) beside flow "b"
    (a Chain), driven together: "b" finishes while attempt 1 is stuck, attempt 2 completes "a",
    and attempt 1's late decision is refused. Returns "a"'s step as inspect shows it."""
    DB["path"] = env.engine.store.path
    stuck.clock = env.clock

    def on_event(e: Any) -> None:
        if e.type == "attemptFailed" and e.flow_id == "a":
            stuck.timed_out.set()
        elif e.type == "flowClosed" and e.flow_id == "b":
            stuck.other_done.set()

    env.engine.events.listeners.append(on_event)
    env.start(StuckFlow(stuck), 10, "a")
    env.start(Chain(), 1, "b")
    env.drive(["a", "b"])
    assert env.client.wait_for_flow("a").single_output(int) == 12  # attempt 2's, not the late 1000
    assert env.client.wait_for_flow("b").single_output(int) == 4  # ran while attempt 1 was stuck
    [step] = env.inspect("a")["steps"]
    assert [a["outcome"] for a in step["attempts"]] == ["TIMED_OUT", "COMPLETED"]
    return step  # type: ignore[no-any-return]


def test_a_late_commit_of_a_timed_out_attempt_is_refused_and_other_flows_go_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[tuple[str, str, int]] = []
    real = transitions.complete_execute

    def spy(*args: Any, **kwargs: Any) -> Any:
        applied.append((args[1].flow_id, args[1].seid, args[1].attempt))
        return real(*args, **kwargs)

    monkeypatch.setattr(transitions, "complete_execute", spy)
    SEEN.clear()
    stuck = Stuck()
    with DexTestEnv() as env:
        step = stuck_beside_a_chain(env, stuck)
        completed = [e for e in env.inspect("a")["history"] if e["type"] == "StepExecuteCompleted"]
        assert len(completed) == 1
        assert [x for x in applied if x[0] == "a"] == [("a", step["stepExecutionId"], 2)]
        assert not env.engine.activity().running
    assert len(stuck.threads) == 2 and stuck.threads[0] != stuck.threads[1]


def test_a_stuck_thread_is_replaced() -> None:
    """The pool's limit is 1; its one thread is stuck and abandoned: a new one runs the next call."""
    loop = asyncio.new_event_loop()
    try:
        threads = StepThreads(loop, 1)
        release = threading.Event()
        stuck: dict[str, Any] = {}

        def block() -> int:
            stuck["worker"] = current_worker()
            stuck["started"].set()
            release.wait(30)
            return 1

        async def go() -> list[int]:
            stuck["started"] = threading.Event()
            first = threads.submit(block, (), contextvars.copy_context())
            await loop.run_in_executor(None, stuck["started"].wait, 30)
            second = threads.submit(lambda: 2, (), contextvars.copy_context())
            threads.abandon(stuck["worker"])  # its attempt timed out
            got = [await asyncio.wait_for(second, 30)]
            release.set()
            got.append(await asyncio.wait_for(first, 30))
            return got

        assert loop.run_until_complete(go()) == [2, 1]
        threads.close()
    finally:
        loop.close()
