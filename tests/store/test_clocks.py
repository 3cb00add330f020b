"""Each flow's clock: its offset, skips that move only the flows named, the schedule read in real
time, a reset that keeps what is due, and the old database-wide offset adopted once."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dexcli.store import FlowState, StepState, Store
from dexcli.store.clocks import MAX_CLOCK_OFFSET, ClockRangeError
from tests.store.builders import T0, add_flow, add_running, add_step, flow, raw, step


def _write(db: Path, sql: str, args: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(db)
    try:
        with conn:
            conn.execute(sql, args)
    finally:
        conn.close()


def test_a_skip_moves_only_the_flows_named_and_two_skips_both_count(store: Store, db: Path) -> None:
    with store.tx() as tx:
        add_flow(tx, "a")
        add_flow(tx, "b")
    assert store.skip_flows(["b"], 120).moved == {"b": 120.0}
    other = Store(db)
    try:  # another process skipping at the same time: both skips count
        assert other.skip_flows(["b"], 30.5).moved == {"b": 150.5}
    finally:
        other.close()
    assert store.skip_flows(["b"], -50).moved == {"b": 150.5}  # never back
    assert flow(store, "a").clock_offset == 0.0 and flow(store, "b").clock_offset == 150.5
    assert store.flow_offsets(None) == {"b": 150.5}
    assert store.flow_offsets(["a"]) == {}


def _until_state(pid: int, state: str) -> None:
    end = time.monotonic() + 10
    while time.monotonic() < end:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rpartition(")")[2].split()[0] == state:
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never reached state {state}")


def test_a_skip_leaves_alone_a_flow_a_live_running_process_holds(store: Store) -> None:
    """Live: this test's process. Not live: one that exited and was waited for, one that exited
    and was not (a zombie), one stopped by SIGSTOP; a lease of the caller's own (`mine`)."""
    host = socket.gethostname()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(stopped.pid, signal.SIGSTOP)
        _until_state(zombie.pid, "Z")  # it exited; nobody waits for it until the end
        _until_state(stopped.pid, "T")
        owners = {"live": f"{host}:{os.getpid()}:a", "gone": f"{host}:{gone.pid}:a",
                  "zombie": f"{host}:{zombie.pid}:a", "stopped": f"{host}:{stopped.pid}:a",
                  "mine": "me:1:b", "nobody": "elsewhere:1:a"}
        with store.tx() as tx:
            for fid, owner in owners.items():
                add_flow(tx, fid)
                add_running(tx, fid, "R-1", owner)
        skipped = store.skip_flows(None, 60, mine="me:1")
        assert skipped.held == {"live": owners["live"]}
        assert skipped.moved == {f: 60.0 for f in owners if f != "live"}
        assert store.skip_flows(["live"], 60).held == {"live": owners["live"]}
        assert flow(store, "live").clock_offset == 0.0
    finally:
        stopped.kill()
        stopped.wait()
        zombie.wait()


def test_skipping_all_moves_only_running_flows(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "a")
        add_flow(tx, "done")
        tx.close_flow("done", FlowState.COMPLETED, T0 + 1, None, None)
    assert store.skip_flows(None, 60).moved == {"a": 60.0}
    assert flow(store, "done").clock_offset == 0.0


def test_the_schedule_and_claims_are_read_in_real_time(store: Store) -> None:
    """A flow's stored times are on its own clock: skipped 100 s ahead, its retry at T0+120 is
    due at real T0+20; the other flow's step at T0+50 is not due before real T0+50."""
    with store.tx() as tx:
        add_flow(tx, "a")
        add_flow(tx, "b")
        add_step(tx, "a", "A-1", next_attempt_at=T0 + 50)
        add_step(tx, "b", "B-1", status=StepState.BACKOFF, attempt=1, next_attempt_at=T0 + 120)
        add_running(tx, "b", "R-1", "other", heartbeat_deadline=T0 + 160)
    store.skip_flows(["b"], 100)
    sched = store.schedule(None, "me")
    assert sched.due == T0 + 20 and sched.foreign == (("other", T0 + 60),)
    due = store.read(lambda tx: tx.runnable_steps(T0 + 30, None, 10))
    assert [(r.step.step_execution_id, r.clock_offset) for r in due] == [("B-1", 100.0)]
    expired = store.read(lambda tx: tx.expired_foreign_attempts(T0 + 60, "me", None))
    assert [(s.step_execution_id, off) for s, off in expired] == [("R-1", 100.0)]
    assert store.read(lambda tx: tx.expired_foreign_attempts(T0 + 59, "me", None)) == []


def test_a_reset_puts_the_flow_on_real_time_and_keeps_what_is_due(store: Store, db: Path) -> None:
    with store.tx() as tx:
        add_flow(tx, "b", start_time=T0)
        add_step(tx, "b", "W-1", status=StepState.WAITING, next_attempt_at=T0 + 300)
        tx.add_event("b", T0 + 200, "Something", {})
    wait = {"conditions": [{"kind": "TIMER", "firingTime": T0 + 300, "skipped": False}]}
    _write(db, "UPDATE steps SET wait = ? WHERE flow_id = 'b'", (json.dumps(wait),))
    store.skip_flows(["b"], 100)
    before = store.schedule(None, "me").due
    assert store.reset_flow_clock("b") == 100.0
    assert flow(store, "b").clock_offset == 0.0 and flow(store, "b").start_time == T0 - 100
    assert store.schedule(None, "me").due == before == T0 + 200
    assert step(store, "b", "W-1").next_attempt_at == T0 + 200
    assert json.loads(step(store, "b", "W-1").wait or "")["conditions"][0]["firingTime"] == T0 + 200
    assert [e.event_time for e in store.history_of("b")] == [T0 + 100]
    assert store.reset_flow_clock("b") == 0.0  # already on real time


def test_the_old_database_wide_offset_becomes_each_flows_own_once(store: Store, db: Path) -> None:
    with store.tx() as tx:
        add_flow(tx, "a")
        add_flow(tx, "b")
    store.skip_flows(["b"], 10)
    _write(db, "INSERT INTO meta (key, value) VALUES ('clock_offset', '90.0')")
    again = Store(db)
    again.close()
    assert flow(store, "a").clock_offset == 90.0 and flow(store, "b").clock_offset == 100.0
    assert raw(db, "SELECT value FROM meta WHERE key = 'clock_offset'") == []
    Store(db).close()  # adopted once: opening again changes nothing
    assert flow(store, "a").clock_offset == 90.0


def test_a_read_only_database_with_the_old_offset_still_opens(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    Store(db).close()
    _write(db, "INSERT INTO meta (key, value) VALUES ('clock_offset', '5')")
    db.chmod(0o444)
    tmp_path.chmod(0o555)
    try:
        Store(db, create=False).close()
    finally:
        tmp_path.chmod(0o755)
        db.chmod(0o644)


def test_a_skip_no_clock_can_take_is_refused_and_moves_nothing(store: Store) -> None:
    """A skip that would put a clock past what a date can show (or is not a number) raises
    before it moves any flow: dates in `dex list` and `dex time reset` stay in range."""
    with store.tx() as tx:
        add_flow(tx, "a")
        add_flow(tx, "b")
    store.skip_flows(["b"], MAX_CLOCK_OFFSET - 10)
    for seconds in (float("nan"), float("inf"), 3.6e14):
        with pytest.raises(ClockRangeError):
            store.skip_flows(["a"], seconds)
    with pytest.raises(ClockRangeError, match="flow b's clock"):
        store.skip_flows(["a", "b"], 20)  # b would pass the bound: a does not move either
    assert flow(store, "a").clock_offset == 0.0 and flow(store, "b").clock_offset == MAX_CLOCK_OFFSET - 10
    assert store.skip_flows(["a", "b"], 10).moved["b"] == MAX_CLOCK_OFFSET  # up to the bound is fine
    store.reset_flow_clock("b")
    assert store.list_flows()  # every stored time still a date
