"""`dex worker --until-idle --time-skip` skips a dead process's heartbeat deadline as
`dex resume --time-skip` does, instead of waiting it out in real time: it moves that flow's
clock, and no other's."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

from tests.crash.crashkit import dex, snapshot


def test_a_time_skipping_worker_declares_a_crashed_attempt_lost_without_waiting(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    victim = dex(db, "run", "polling", "--flow-id", "w", "--crash-at", "heartbeat:1")
    assert victim.returncode == 137, victim.describe()
    done = dex(db, "run", "three-steps", "--input", "1", "--flow-id", "done")
    assert done.returncode == 0, done.describe()
    t0 = time.monotonic()
    worker = dex(db, "worker", "--until-idle", "--time-skip", timeout=40)
    wall = time.monotonic() - t0
    assert worker.returncode == 0, worker.describe()
    assert wall < 20, f"the worker waited {wall:.1f} s of real time for a 60 s heartbeat timeout"
    snap = snapshot(db, "w")
    assert snap.status == "COMPLETED" and snap.problems == []
    tries = [a for (seid, _), a in sorted(snap.attempts.items()) if seid == "AwaitJob-1"]
    assert [(a["outcome"], a["error_type"]) for a in tries] == [("LOST", "Heartbeat"), ("COMPLETED", None)]
    with closing(sqlite3.connect(db)) as c:
        offsets = dict(c.execute("SELECT flow_id, clock_offset FROM flows").fetchall())
        assert c.execute("SELECT * FROM meta WHERE key = 'clock_offset'").fetchall() == []
    assert offsets["w"] >= 55 and offsets["done"] == 0.0, offsets  # the skip was w's alone
