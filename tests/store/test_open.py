"""Opening a database: a new file gets the schema; anything that is not a dex database this
version understands is refused with StoreError, and left as it was."""

from __future__ import annotations

import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from dexcli.store import SCHEMA_VERSION, FlowState, Store, StoreError
from tests.store.builders import add_flow, raw

TABLES = {"meta", "flows", "steps", "ended_attempts", "history", "stream_messages", "stream_usage", "kv",
          "channel_messages", "attributes", "search_attributes", "attribute_locks", "attribute_snapshots",
          "attribute_sync"}


def _tables(path: Path) -> set[str]:
    return {r[0] for r in raw(path, "SELECT name FROM sqlite_master WHERE type = 'table'")} - {"sqlite_sequence"}


def test_a_new_file_gets_the_schema_and_marks(db: Path) -> None:
    Store(db).close()
    assert db.is_file()
    assert _tables(db) == TABLES
    assert raw(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert raw(db, "PRAGMA application_id") == [(0x0DE7,)]
    assert raw(db, "PRAGMA journal_mode") == [("wal",)]


def test_a_missing_folder_is_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "dex.db"
    Store(path).close()
    assert _tables(path) == TABLES


def test_reopening_keeps_the_data(db: Path) -> None:
    s = Store(db)
    with s.tx() as tx:
        add_flow(tx, "f")
    s.close()
    again = Store(db, create=False)
    try:
        record = again.get_flow("f")
        assert record is not None and record.status is FlowState.RUNNING
    finally:
        again.close()


def test_an_empty_file_is_a_new_database(db: Path) -> None:
    db.touch()
    Store(db).close()
    assert _tables(db) == TABLES


def test_a_sqlite_file_of_another_application_is_refused_and_untouched(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a dex database"):
        Store(db)
    assert _tables(db) == {"invoices"}
    assert raw(db, "SELECT total FROM invoices") == [(9.5,)]
    assert raw(db, "PRAGMA user_version") == [(0,)]


def test_a_file_that_is_not_sqlite_is_refused(db: Path) -> None:
    db.write_text("flow_id,status\nf,RUNNING\n" * 200)
    with pytest.raises(StoreError, match="not a dex database"):
        Store(db)
    assert db.read_text().startswith("flow_id,status")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="directory"):
        Store(tmp_path)


def test_a_newer_schema_version_is_refused(db: Path) -> None:
    Store(db).close()
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}"):
        Store(db)


def test_a_missing_file_without_create_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "dex.db"
    with pytest.raises(StoreError, match="no dex database"):
        Store(path, create=False)
    assert not path.exists() and not path.parent.exists()


def test_an_existing_database_opens_without_create(db: Path) -> None:
    Store(db).close()
    Store(db, create=False).close()


def test_a_version_1_database_is_migrated_and_keeps_its_flows(tmp_path: Path) -> None:
    """A database made by the previous dex (schema version 1) opens: new columns and tables
    are added in one transaction, its rows stay, and the steps index covers WAITING steps."""
    path = tmp_path / "v1.db"
    conn = sqlite3.connect(path)
    conn.executescript((Path(__file__).parent / "schema_v1.sql").read_text())
    conn.execute("PRAGMA application_id = 3559")
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO flows (flow_id, run_id, flow_type, status, start_time) "
                 "VALUES ('old', 'r1', 'PollingFlow', 'COMPLETED', 1.0)")
    conn.commit()
    conn.close()
    store = Store(path)
    flow = store.get_flow("old")
    store.close()
    assert flow is not None and flow.status is FlowState.COMPLETED and flow.clock_offset == 0.0
    assert raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    assert _tables(path) == TABLES
    step_columns = {r[1] for r in raw(path, "PRAGMA table_info(steps)")}
    assert {"method", "method_base", "wait", "condition_results", "locals"} <= step_columns
    assert {r[1] for r in raw(path, "PRAGMA table_info(attempts)")} >= {"method", "stack_trace"}
    index_sql = raw(path, "SELECT sql FROM sqlite_master WHERE name = 'steps_open'")[0][0]
    assert "WAITING" in index_sql
    assert raw(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'steps_active'") == [(0,)]


def test_a_version_2_database_gets_the_start_option_columns_and_keeps_its_flows(tmp_path: Path) -> None:
    """Version 2 -> 3 adds the flows' timeout, timeout policy and time, start delay and id reuse
    policy; a flow of the old database reads back with none of them set."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path)
    conn.executescript((Path(__file__).parent / "schema_v2.sql").read_text())
    conn.execute("PRAGMA application_id = 3559")
    conn.execute("PRAGMA user_version = 2")
    conn.execute("INSERT INTO flows (flow_id, run_id, flow_type, status, start_time, clock_offset) "
                 "VALUES ('old', 'r1', 'PollingFlow', 'RUNNING', 1.0, 5.0)")
    conn.commit()
    conn.close()
    store = Store(path)
    flow = store.get_flow("old")
    sched = store.schedule(None, "me")
    store.close()
    assert flow is not None and flow.is_running and flow.clock_offset == 5.0
    assert (flow.timeout, flow.timeout_policy, flow.timeout_at, flow.start_delay, flow.id_reuse_policy) == \
        (None, None, None, None, None)
    assert sched.due is None  # no timeout: nothing is due
    assert raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    flow_columns = {r[1] for r in raw(path, "PRAGMA table_info(flows)")}
    assert {"timeout", "timeout_policy", "timeout_at", "timeout_handler_options", "start_delay",
            "id_reuse_policy"} <= flow_columns


def _plan(store: Store, sql: str, args: tuple[object, ...]) -> str:
    rows = store.read(lambda tx: tx.c.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall())
    return " ".join(str(r[-1]) for r in rows)


def test_a_version_3_database_gets_the_scheduler_indexes_and_the_schedule_reads_through_them(tmp_path: Path) -> None:
    """Version 3 -> 4 adds partial indexes so that a scheduler pass reads what is open, not
    every step a long-lived database holds; each of its queries must name them to use them."""
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path)
    conn.executescript((Path(__file__).parent / "schema_v3.sql").read_text())
    conn.execute("PRAGMA application_id = 3559")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    store = Store(path)
    traced: list[str] = []
    store.read(lambda tx: tx.c.set_trace_callback(traced.append))
    store.schedule(None, "me")
    store.read(lambda tx: tx.runnable_steps(1e12, None, 10))
    store.read(lambda tx: tx.expired_foreign_attempts(1e12, "me", None))
    store.read(lambda tx: tx.due_flow_timeouts(1e12, None))
    store.flow_offsets(None)
    store.read(lambda tx: tx.c.set_trace_callback(None))
    assert raw(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    plans = " ".join(_plan(store, sql, ()) for sql in traced)
    store.close()
    for index in ("steps_open", "steps_running", "flows_timeouts", "flows_offsets"):
        assert f"USING INDEX {index}" in plans or f"USING COVERING INDEX {index}" in plans, (index, plans)
    scans = re.findall(r"SCAN (?!CONSTANT ROW)(\w+)( USING)?", plans)
    assert all(using for _, using in scans), plans  # no table scans, only (partial) index reads


# ------------------------------------------------------------------------- read-only opens
def test_a_read_only_open_writes_nothing(db: Path) -> None:
    from dexcli.store.errors import DatabaseMissingError, NotADexDatabaseError, ReadOnlyDatabaseError

    with pytest.raises(DatabaseMissingError, match="no dex database"):
        Store(db, read_only=True)
    assert not db.exists()
    db.write_bytes(b"")
    with pytest.raises(NotADexDatabaseError, match="empty file"):
        Store(db, read_only=True)
    assert db.read_bytes() == b""
    db.unlink()
    Store(db).close()
    store = Store(db, read_only=True)
    try:
        assert store.list_flows() == []
        with pytest.raises(ReadOnlyDatabaseError, match="database is read-only"), store.tx() as tx:
            tx.kv_put("ns", "k", 1)
    finally:
        store.close()


def test_a_read_only_open_of_an_older_database_upgrades_it_first(db: Path) -> None:
    """Reading needs the new schema's columns: a database this process may write is upgraded
    (as any open does), then read."""
    shutil.copy(Path(__file__).parent / "fixtures" / "v4_running.db", db)  # written by the previous dex
    store = Store(db, read_only=True)
    try:
        assert len(store.list_flows()) == 5
    finally:
        store.close()
    assert raw(db, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
