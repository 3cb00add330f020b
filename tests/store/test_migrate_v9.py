"""Schema 10 spells the open-steps index's WHERE as equalities (`status = 'QUEUED' OR …`), not
as `status IN (…)`: SQLite evaluates a partial index's WHERE on every write of a row, and an IN
of more than two values builds temporary B-trees each time. A version 9 database (the same
index with the IN) is upgraded on its first open and its running flow finishes; the writes of
a flow's transitions then build no temporary B-tree (test_open.py checks that the scheduler's
reads still go through the index)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dexcli import Context, Flow, FlowStatus, Step, StepDecision, StepList, go_to, graceful_complete
from dexcli.store import Store
from dexcli.store.connection import SCHEMA_VERSION
from dexcli.testing import DexTestEnv

OLD_INDEX = ("CREATE INDEX steps_open ON steps(status, next_attempt_at) "
             "WHERE status IN ('QUEUED', 'BACKOFF', 'WAITING')")


def make_version_9(db: Path) -> None:
    """Turn a database this dex wrote back into what version 9 was: the index with the IN."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("DROP INDEX steps_open")
        conn.execute(OLD_INDEX)
        conn.execute("PRAGMA user_version = 9")
        conn.commit()
    finally:
        conn.close()


class Last(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input + 1)


class First(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Last, input + 1)


class TwoSteps(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(First()).other_steps(Last())


def _builds_temporary_b_trees(db: Path, sql: str) -> bool:
    """Whether `sql`'s program opens a temporary B-tree (a fresh connection: EXPLAIN reads no
    database, so an open one would compile against the schema it read before)."""
    conn = sqlite3.connect(db)
    try:
        return any(op[1] == "OpenEphemeral" for op in conn.execute("EXPLAIN " + sql))
    finally:
        conn.close()


def _ephemeral_writes(db: Path, flow_id: str) -> tuple[list[str], list[str]]:
    """Run TwoSteps as `flow_id`; every statement that wrote the steps table, and those among
    them whose program opens a temporary B-tree."""
    traced: list[str] = []
    with DexTestEnv(db, start=0.0) as env:
        env.engine.store.read(lambda tx: tx.c.set_trace_callback(traced.append))
        env.run(TwoSteps(), 1, flow_id)
        assert env.result(flow_id).single_output(int) == 3
        env.engine.store.read(lambda tx: tx.c.set_trace_callback(None))
    writes = [s for s in traced if s.lstrip().upper().startswith(("UPDATE STEPS", "INSERT INTO STEPS"))]
    ephemeral = [s for s in writes if _builds_temporary_b_trees(db, s)]
    return writes, ephemeral


COMPLETE = "UPDATE steps SET status = 'COMPLETED', end_time = 1.0 WHERE flow_id = 'x' AND step_execution_id = 'y'"


def test_a_version_9_database_gets_the_index_rewritten_and_its_running_flow_finishes(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db, start=0.0) as env:
        env.client.start_flow(TwoSteps(), "left", 10)  # started, never driven: its first step is queued
    make_version_9(db)
    conn = sqlite3.connect(db)
    assert _builds_temporary_b_trees(db, COMPLETE)  # with the old index, a step row's write does
    Store(db).close()  # the first open migrates it
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'steps_open'").fetchone()
    assert " IN " not in sql and "'WAITING'" in sql
    assert not _builds_temporary_b_trees(db, COMPLETE)
    conn.close()
    with DexTestEnv(db, start=0.0) as env:
        env.start(TwoSteps(), 1, "after")  # a start after the upgrade (it registers the flow's code here)
        assert env.client.wait_for_flow("after").status is FlowStatus.COMPLETED
        assert env.client.wait_for_flow("left").status is FlowStatus.COMPLETED
        assert env.result("left").single_output(int) == 12


def test_the_writes_of_a_transition_build_no_temporary_b_tree(tmp_path: Path) -> None:
    writes, ephemeral = _ephemeral_writes(tmp_path / "dex.db", "f")
    assert len(writes) >= 3 and ephemeral == []


def test_no_statement_of_the_store_tests_a_column_against_more_than_two_constants_with_in() -> None:
    """The rule behind schema 10, for every statement the store writes: a few constants are
    tested with equalities (`indexed.any_of`), not `IN ('A', 'B', 'C')`."""
    import re

    import dexcli.store

    folder = Path(dexcli.store.__file__).parent
    pattern = re.compile(r"\bIN\s*\(\s*'[^']*'\s*(,\s*'[^']*'\s*){2,}\)", re.IGNORECASE)
    found = [f"{path.name}: {m.group(0)}" for path in sorted(folder.glob("*.py")) + [folder / "schema.sql"]
             for m in pattern.finditer(path.read_text())]
    assert found == []
