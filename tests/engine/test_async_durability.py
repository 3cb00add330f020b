"""execute_durability=ASYNC (StepOptions, as Dex's StepDurability): a step's result is
acknowledged before it is persistent. Its transition is applied (the next step runs at once),
and the commit comes later, shared with the transitions after it. Under SYNC (the default) each
result is committed before the next step runs. In virtual time; what is durable is read
through a second connection, as another process would see it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    Context,
    Flow,
    FlowStatus,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepOptions,
    go_to,
    graceful_complete,
)
from dexcli.testing import DexTestEnv

SEEN: list[tuple[str, dict[str, str]]] = []  # (step, status of each step another connection sees)


def durable_steps(db: Path, flow_id: str) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT step_execution_id, status FROM steps WHERE flow_id = ?", (flow_id,)))
    finally:
        conn.close()


def make_flow(durability: StepDurability, db: Path) -> Flow[int]:
    opts = StepOptions(execute_durability=durability)

    class Looking(Step[int]):
        def get_step_options(self) -> StepOptions:
            return opts

        def look(self, context: Context) -> None:
            SEEN.append((type(self).__name__, durable_steps(db, context.flow_id)))

    class C(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return graceful_complete(n + 3)

    class B(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(C, n * 2)

    class A(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(B, n + 1)

    class Chain(Flow[int]):
        def get_steps(self) -> StepList[int]:
            return StepList.start_step(A()).other_steps(B(), C())

    return Chain()


def run(tmp_path: Path, durability: StepDurability) -> tuple[Any, int]:
    SEEN.clear()
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        flow = make_flow(durability, db)
        env.start(flow, 1, "f")
        before = env.store.commits
        env.drive(["f"], until=lambda: env.result("f").status is not FlowStatus.RUNNING)
        commits = env.store.commits - before
        result = env.result("f")
    return result, commits


def test_async_results_are_acknowledged_before_they_are_committed(tmp_path: Path) -> None:
    result, commits = run(tmp_path, StepDurability.ASYNC)
    assert result.single_output() == 7
    # each next step ran before the step before it was durable: another process saw nothing of it
    assert SEEN == [("A", {"A-1": "RUNNING"}), ("B", {"A-1": "RUNNING"}), ("C", {"A-1": "RUNNING"})]
    assert commits < 3  # three transitions shared fewer commits
    assert durable_steps(tmp_path / "dex.db", "f") == {"A-1": "COMPLETED", "B-1": "COMPLETED", "C-1": "COMPLETED"}


def test_sync_results_are_committed_before_the_next_step_runs(tmp_path: Path) -> None:
    result, commits = run(tmp_path, StepDurability.SYNC)
    assert result.single_output() == 7
    assert SEEN == [("A", {"A-1": "RUNNING"}), ("B", {"A-1": "COMPLETED", "B-1": "RUNNING"}),
                    ("C", {"A-1": "COMPLETED", "B-1": "COMPLETED", "C-1": "RUNNING"})]
    assert commits >= 3


@pytest.mark.parametrize("durability", [StepDurability.DEFAULT, StepDurability.SYNC])
def test_default_durability_is_sync(tmp_path: Path, durability: StepDurability) -> None:
    run(tmp_path, durability)
    assert SEEN[1] == ("B", {"A-1": "COMPLETED", "B-1": "RUNNING"})
