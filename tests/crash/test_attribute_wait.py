"""`dex wait` in one process is woken by a step that another process runs: the payment example
is started and killed at its first heartbeat, `dex wait pay --attribute settled_total --equals
250` begins, and only then `dex resume pay --time-skip` drives the flow to RecordSettlement, whose
committed write ends the wait with exit 0 and the value."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.crash.crashkit import dex, finish, sigkill, spawn

WAIT_SECONDS = 30  # wall seconds a process is given to reach a state


def _has_opened(pid: int, db: Path) -> bool:
    """Whether process `pid` holds the database file open (it is past start-up, reading it)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    target = str(db.resolve())
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                return True
        except OSError:
            continue
    return False


def test_dex_wait_is_woken_by_the_step_another_process_runs(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    first = dex(db, "run", "payment", "--flow-id", "pay", "--input", '{"payment_id": "p-1", "amount": 250}',
                "--crash-at", "heartbeat:1")
    assert first.returncode == 137, first.describe()  # the flow stays RUNNING, settled_total unset
    waiter = spawn(db, "wait", "pay", "--attribute", "settled_total", "--equals", "250", "--timeout", "30s")
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not _has_opened(waiter.pid, db):
            assert waiter.poll() is None, finish(waiter).describe()
            assert time.monotonic() < deadline, "dex wait did not open the database"
            time.sleep(0.02)
        assert waiter.poll() is None  # it waits: nothing has settled yet
        resumed = dex(db, "resume", "pay", "--time-skip")
        settled_at = time.monotonic()
        assert resumed.returncode == 0, resumed.describe()
        assert "✓ RecordSettlement-1 gracefulComplete → 250" in resumed.stdout
        woken = finish(waiter, timeout=WAIT_SECONDS)
        took = time.monotonic() - settled_at
    finally:
        sigkill(waiter)
    assert (woken.returncode, woken.stdout, woken.stderr) == (0, "250\n", ""), woken.describe()
    assert took < 5.0, f"dex wait returned {took:.1f} s after the flow settled"
