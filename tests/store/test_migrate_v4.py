"""A database written by the previous dex (schema version 4, `fixtures/v4_running.db`, made by
`fixtures/make_v4.sh`) opens under this one, and the flows it left running finish: queued,
leased to a process that died, retried after a failure, and waiting on a channel and a timer.
Through the real `dex` command, as a user upgrading would run it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dexcli.store.connection import SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "fixtures" / "v4_running.db"
ENV = {"NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb", "PATH": "/usr/bin:/bin"}


def dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", "--db", str(db), *args], capture_output=True,
                          text=True, timeout=120, env=ENV)


def inspect(db: Path, flow_id: str) -> Any:
    res = dex(db, "inspect", flow_id, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_fixture_is_a_version_4_database_with_flows_left_running() -> None:
    conn = sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA user_version").fetchone() == (4,)
        statuses = dict(conn.execute("SELECT flow_id, status FROM flows").fetchall())
        steps = {(f, s): st for f, s, st in conn.execute("SELECT flow_id, step_execution_id, status FROM steps")}
    finally:
        conn.close()
    assert statuses == {"three-done": "COMPLETED", "three-queued": "RUNNING", "three-crashed": "RUNNING",
                        "three-retry": "RUNNING", "approval": "RUNNING"}
    assert steps[("three-crashed", "Second-1")] == "RUNNING"
    assert steps[("three-queued", "First-1")] == "QUEUED"
    assert steps[("approval", "AwaitDecision-1")] == "WAITING"


def back_to_when_it_was_made(conn: sqlite3.Connection) -> None:
    """Set the running flows' clocks back to the moment the fixture was made (its last start),
    as if the process that left them had just stopped: the fixture ages, and its flows'
    deadlines (a step's 4 h TotalDuration) are on their own clocks, not on this test's day."""
    made = conn.execute("SELECT MAX(start_time) FROM flows").fetchone()[0]
    conn.execute("UPDATE flows SET clock_offset = ? WHERE status = 'RUNNING'", (made + 5 - time.time(),))
    conn.commit()


def test_a_version_4_database_opens_and_its_running_flows_finish(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    before = inspect(db, "three-done")  # the first open migrates it
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("SELECT COUNT(*) FROM attribute_sync").fetchone() == (0,)  # schema 7's outbox
    back_to_when_it_was_made(conn)
    conn.close()
    events = before["history"]["events"]
    assert [e["eventId"] for e in events] == [str(i) for i in range(1, len(events) + 1)]  # counted per flow
    assert before["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED" and output(before) == 7

    res = dex(db, "rpc", "approval", "approve", "--input", '"ann"')
    assert res.returncode == 0, res.stderr
    res = dex(db, "worker", "--until-idle", "--time-skip")
    assert res.returncode == 0, res.stderr

    results = {f: inspect(db, f) for f in ("three-queued", "three-crashed", "three-retry", "approval")}
    assert {f: r["summary"]["flowStatus"] for f, r in results.items()} == dict.fromkeys(results,
                                                                                         "FLOW_STATUS_COMPLETED")
    assert {f: output(results[f]) for f in ("three-queued", "three-crashed", "three-retry")} == \
        {"three-queued": 9, "three-crashed": 11, "three-retry": 13}
    # the dead process's attempt is declared lost, then retried; the failed attempt stays failed
    assert outcomes(results["three-crashed"], "Second-1") == ["LOST", "COMPLETED"]
    assert outcomes(results["three-retry"], "First-1") == ["FAILED", "LOST", "COMPLETED"]
    after = inspect(db, "three-done")
    assert after["history"] == before["history"] and after["steps"] == before["steps"]


def test_a_version_4_database_gets_the_subflow_links_and_runs_subflows(tmp_path: Path) -> None:
    """Schema 6: flows.parent_flow_id / parent_step_execution_id and their index; the flows the
    old database holds have no parent and no children."""
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    view = inspect(db, "three-done")
    assert "parentFlowId" not in view["summary"] and view["subFlows"] == []
    conn = sqlite3.connect(db)
    try:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(flows)")}
        indexes = {r[1] for r in conn.execute("PRAGMA index_list(flows)")}
    finally:
        conn.close()
    assert {"parent_flow_id", "parent_step_execution_id"} <= cols and "flows_children" in indexes
    res = dex(db, "run", "fan-out", "--flow-id", "fan", "--input", "2", "--time-skip")
    assert res.returncode == 0, res.stderr
    assert output(inspect(db, "fan"))["sumOfSquares"] == 5
    assert inspect(db, "SubFlow:fan-Split-1-1")["summary"]["parentFlowId"] == "fan"


def output(view: Any) -> Any:
    (completion,) = view["summary"]["completions"]
    return completion["output"]


def outcomes(view: Any, seid: str) -> list[str]:
    (step,) = [s for s in view["steps"] if s["stepExecutionId"] == seid]
    return [a["outcome"] for a in step["attempts"]]


def test_schema_6_adds_flow_config_and_the_continue_as_new_chain_to_every_flow(tmp_path: Path) -> None:
    """Migration 5 → 6: flows.flow_config, first_run_id and step_numbers, NULL for the flows
    already there (no FlowConfig, the first run of no chain, no earlier runs' steps)."""
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    view = inspect(db, "approval")
    conn = sqlite3.connect(db)
    try:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(flows)")}
        values = set(conn.execute("SELECT flow_config, first_run_id, step_numbers FROM flows").fetchall())
    finally:
        conn.close()
    assert {"flow_config", "first_run_id", "step_numbers"} <= columns
    assert values == {(None, None, None)}
    assert view["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
    assert view["summary"]["firstRunId"] == view["summary"]["runId"] and len(view["runs"]) == 1
