"""The statements behind one method call's attribute rules: a step's lock is live for its whole
call (running, backing off, given back between attempts), and a write keeps, for each step in a
call, only what it overwrote (one row per key and call), so a retry reads the call's snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexcli.store import StepState, Store, Tx
from tests.store.builders import T0, add_flow, add_running, add_step


def _rows(tx: Tx) -> list[tuple[str, str, str | None]]:
    return [tuple(r) for r in tx.c.execute(
        "SELECT step_execution_id, key, value FROM attribute_snapshots ORDER BY step_execution_id, key")]


@pytest.mark.parametrize(("status", "attempt", "base", "live"), [
    (StepState.RUNNING, 1, 0, True),
    (StepState.BACKOFF, 1, 0, True),
    (StepState.QUEUED, 1, 0, True),  # given back between attempts (a clean stop): the call goes on
    (StepState.QUEUED, 0, 0, False),  # not begun
    (StepState.QUEUED, 2, 2, False),  # execute queued after its wait_for: its call has not begun
    (StepState.WAITING, 1, 0, False),
    (StepState.COMPLETED, 1, 0, False),
    (StepState.CANCELED, 1, 0, False),
], ids=lambda v: getattr(v, "value", str(v)))
def test_a_step_lock_is_live_while_its_method_call_lasts(store: Store, status: StepState, attempt: int,
                                                          base: int, live: bool) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_step(tx, "f", "Locked-1", status=status, attempt=attempt, method_base=base)
        assert tx.try_locks("f", ("counter",), "Locked-1", T0) is None
    with store.tx() as tx:
        assert tx.lock_holder("f", "counter", T0 + 1) == ("Locked-1" if live else None)
        assert bool(tx.locks_of("f", T0 + 1)) is live


def test_taking_its_own_locks_again_keeps_when_they_were_first_taken(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_running(tx, "f", "Locked-1", "me")
        assert tx.try_locks("f", ("counter",), "Locked-1", T0) is None
        assert tx.try_locks("f", ("counter",), "Locked-1", T0 + 30) is None  # its next attempt
        assert tx.locks_of("f", T0 + 31) == [("counter", "Locked-1", T0, None)]


def test_a_write_keeps_what_it_overwrote_for_the_steps_in_a_call_only(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.put_attribute("f", "counter", "counter", None, "5", T0)
        tx.put_attribute("f", "other", "other", None, '"kept"', T0)
        add_running(tx, "f", "Reader-1", "me")
        add_step(tx, "f", "Backoff-1", status=StepState.BACKOFF, attempt=1)
        add_step(tx, "f", "Queued-1")  # not in a call: it reads the live values when it begins
        add_running(tx, "f", "Writer-1", "me")
        for _ in range(2):  # a second write in the same call keeps the first value
            tx.keep_call_snapshots("f", ["counter", "notes/a"], "Writer-1")
            tx.put_attribute("f", "counter", "counter", None, "6", T0 + 1)
            tx.put_attribute("f", "notes/a", "notes", "a", '"x"', T0 + 1)
        assert _rows(tx) == [("Backoff-1", "counter", "5"), ("Backoff-1", "notes/a", None),
                             ("Reader-1", "counter", "5"), ("Reader-1", "notes/a", None)]
        assert tx.attributes_at_call_start("f", "Reader-1", ("notes/",)) == {"counter": "5", "other": '"kept"'}
        assert tx.attributes_of("f", ("notes/",)) == {"counter": "6", "other": '"kept"', "notes/a": '"x"'}
        assert tx.attributes_at_call_start("f", "Queued-1") == {"counter": "6", "other": '"kept"'}

        tx.forget_call_snapshot("f", "Reader-1")
        assert [r[0] for r in _rows(tx)] == ["Backoff-1", "Backoff-1"]
        tx.forget_call_snapshot("f")
        assert _rows(tx) == []


def test_a_snapshot_moves_with_an_archived_run(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_running(tx, "f", "Reader-1", "me")
        tx.keep_call_snapshots("f", ["counter"], None)
        archived = tx.archive_run("f", "run-f")
        assert tx.c.execute("SELECT flow_id FROM attribute_snapshots").fetchall() == [(archived,)]


def test_a_version_4_database_gets_the_snapshot_table(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "v4.db"
    conn = sqlite3.connect(path)
    conn.executescript((Path(__file__).parent / "schema_v4.sql").read_text())
    conn.execute("PRAGMA application_id = 3559")
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    store = Store(path)
    with store.tx() as tx:
        add_flow(tx, "f")
        add_running(tx, "f", "Reader-1", "me")
        tx.keep_call_snapshots("f", ["counter"], None)
        assert _rows(tx) == [("Reader-1", "counter", None)]
    store.close()


def test_what_an_ended_call_kept_goes_with_the_next_write_that_keeps_snapshots(store: Store) -> None:
    """A call's end runs no statement for its snapshot (the usual end, no RPC wrote during it);
    what it kept is not read again, and the next write that keeps snapshots drops it first."""
    with store.tx() as tx:
        add_flow(tx, "f")
        add_running(tx, "f", "Ended-1", "me")
        add_running(tx, "f", "Running-1", "me")
        tx.keep_call_snapshots("f", ["counter"], None)
        assert [r[0] for r in _rows(tx)] == ["Ended-1", "Running-1"]
        assert tx.complete_step("f", "Ended-1", "me", 1, '{"kind":"gracefulComplete"}', T0 + 1)
        assert [r[0] for r in _rows(tx)] == ["Ended-1", "Running-1"]  # nothing written at its end
        tx.keep_call_snapshots("f", ["other"], None)
        assert _rows(tx) == [("Running-1", "counter", None), ("Running-1", "other", None)]
