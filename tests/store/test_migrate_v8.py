"""Schema 9 adds a run's flow retry policy and its place among its retries (`flows.retry_policy`,
`flows.retry`; dexcli.engine.transitions.flow_retry): a version 8 database (this schema without
them) is upgraded on its first open, keeps its flows (none has a retry policy), and a flow
started after it retries as any other."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from dexcli import Context, Flow, FlowStatus, RetryPolicy, Step, StepDecision, StepList, force_fail, graceful_complete
from dexcli.sdk.results import StartFlowOptions
from dexcli.store import Store
from dexcli.store.connection import SCHEMA_VERSION
from dexcli.testing import DexTestEnv

RUNS: list[str] = []


class Once(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        RUNS.append(context.run_id)
        return graceful_complete(len(RUNS)) if len(RUNS) >= input else force_fail("not yet")


class OnceFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Once())


def test_a_version_8_database_gets_the_retry_columns_and_keeps_its_flows(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db, start=0.0) as env:
        env.run(OnceFlow(), 1, "before")
    conn = sqlite3.connect(db)
    for column in ("retry_policy", "retry"):  # what version 8 was
        conn.execute(f"ALTER TABLE flows DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 8")
    conn.commit()
    conn.close()
    Store(db).close()  # the first open migrates it
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("SELECT status, retry_policy, retry FROM flows WHERE flow_id = 'before'").fetchone() == (
        "COMPLETED", None, None)
    conn.close()
    RUNS.clear()
    with DexTestEnv(db, start=0.0) as env:
        env.client.start_flow(OnceFlow(), "after", 2, StartFlowOptions(retry_policy=RetryPolicy(
            initial_interval=timedelta(seconds=5), maximum_attempts=2)))
        assert env.client.wait_for_flow("after").status is FlowStatus.COMPLETED
        assert len(set(RUNS)) == 2 and env.inspect("before")["summary"].get("flowRetry") is None
