"""Bad conditions under a running `dex run`, made real: a full disk (a small tmpfs), a write lock
another process holds past the busy timeout, the database file deleted or replaced. Each time
dex stops with one line and exit 5 (the environment's code), the database stays sound, and what was committed is there:
`dex resume` finishes the flow once the condition is gone.

The flow is the polling example waiting on a 20 s job: it commits a heartbeat every 2 s, so the
condition is met by its next write, within a few seconds of real time.

The tmpfs is mounted in a mount namespace of its own (`unshare --user --map-root-user --mount`,
no privilege needed where user namespaces are allowed); dex runs inside it through `nsenter`,
and the test fills the disk through /proc/PID/root. Where that cannot be set up, the disk test
skips and says why.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.crash.crashkit import ENV, ROOT, Trials

DEX = [sys.executable, "-m", "dexcli"]
WAIT = 60  # wall seconds any one dex process may take
TRIALS = Trials("conditions", priority=0)  # real time (a few seconds each): start early


@dataclass
class Outcome:
    """What the run under the bad condition said, and what the database showed afterwards."""

    returncode: int = -1
    stderr: str = ""
    doctor: str = ""
    integrity: str = ""
    status: str = ""
    progress: list[str] = field(default_factory=list)  # the JobProgress states committed
    resumed: subprocess.CompletedProcess[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run(prefix: list[str], db: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *DEX, "--db", str(db), *args], cwd=ROOT, env={**ENV, **env},
                          capture_output=True, text=True, timeout=WAIT)


def start_polling(prefix: list[str], db: Path, **env: str) -> subprocess.Popen[str]:
    """`dex run polling` (a 20 s job) with JSON events, returned once its first Stream message
    (the job QUEUED) is committed."""
    proc = subprocess.Popen([*prefix, *DEX, "--db", str(db), "run", "polling", "--flow-id", "p",
                             "--job-duration", "20s", "--json"], cwd=ROOT, env={**ENV, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if json.loads(line)["type"] == "streamMessage":
            return proc
    raise AssertionError(f"dex run ended before its first Stream message: {proc.communicate(timeout=WAIT)}")


def ended(proc: subprocess.Popen[str], out: Outcome) -> Outcome:
    _, out.stderr = proc.communicate(timeout=WAIT)
    out.returncode = proc.returncode
    return out


def examine(prefix: list[str], db: Path, out: Outcome) -> None:
    """`dex doctor`, SQLite's integrity check, and the flow's committed state."""
    doctor = run(prefix, db, "doctor")
    out.doctor = f"exit {doctor.returncode}: {doctor.stdout}{doctor.stderr}"
    check = subprocess.run([*prefix, sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
                            ".execute('PRAGMA integrity_check').fetchone()[0])", str(db)],
                           capture_output=True, text=True, timeout=WAIT)
    out.integrity = check.stdout.strip() + check.stderr
    snap = json.loads(run(prefix, db, "inspect", "p", "--json").stdout)
    out.status = snap["summary"]["flowStatus"]
    out.progress = [m["value"]["state"] for m in snap["streams"].get("JobProgress", [])]


def resume(prefix: list[str], db: Path, out: Outcome) -> Outcome:
    """Resume the flow (the lost attempt's heartbeat timeout skipped)."""
    out.resumed = run(prefix, db, "resume", "p", "--time-skip")
    return out


def assert_one_line(out: Outcome, *fragments: str) -> None:
    """Exit 5 (the environment) and one line on stderr, `dex: error: ...` holding each fragment."""
    assert out.returncode == 5, (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dex: error: "), out.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])


def assert_sound_and_resumable(out: Outcome) -> None:
    """Nothing committed was lost, the database is sound, and resume finishes the flow."""
    assert out.doctor.startswith("exit 0") and "0 problem(s)" in out.doctor, out.doctor
    assert out.integrity == "ok", out.integrity
    assert out.status == "FLOW_STATUS_RUNNING" and out.progress[:1] == ["QUEUED"], (out.status, out.progress)
    assert out.resumed is not None and out.resumed.returncode == 0, out.resumed
    assert 'result: "artifact for p"' in out.resumed.stdout


# ------------------------------------------------------------------------- disk full
@contextmanager
def small_tmpfs(point: Path, size: str = "2m") -> Iterator[tuple[list[str], Path]]:
    """A small tmpfs (2 MiB) at `point` in a mount namespace of its own: (the prefix that runs a
    command inside it, the same folder as seen from here). Skips the test where it cannot be set up."""
    unshare, nsenter = shutil.which("unshare"), shutil.which("nsenter")
    if unshare is None or nsenter is None:
        pytest.skip("needs unshare and nsenter (util-linux) to mount a small tmpfs")
    point.mkdir()
    holder = subprocess.Popen([unshare, "--user", "--map-root-user", "--mount", "sh", "-c",
                               'mount -t tmpfs -o size="$2" tmpfs "$1" && echo mounted && exec sleep 600', "sh",
                               str(point), size], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stderr is not None
        if holder.stdout.readline().strip() != "mounted":
            pytest.skip(f"cannot mount a tmpfs in a user namespace here: {holder.stderr.read().strip()}")
        prefix = [nsenter, "--target", str(holder.pid), "--user", "--mount", "--"]
        probe = subprocess.run([*prefix, "stat", "-f", "-c", "%T", str(point)], capture_output=True, text=True,
                               timeout=WAIT)
        if probe.stdout.strip() != "tmpfs":
            pytest.skip(f"cannot enter the tmpfs's namespace with nsenter: {probe.stderr.strip()}")
        yield prefix, Path(f"/proc/{holder.pid}/root{point}")
    finally:
        holder.kill()
        holder.communicate(timeout=WAIT)


def fill(folder: Path) -> Path:
    """Write a file in `folder` until its file system is full."""
    filler = folder / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def _disk_full(db: Path) -> Outcome:
    point = db.parent / "small"
    with small_tmpfs(point) as (prefix, outside):
        db = point / "dex.db"
        out = Outcome()
        proc = start_polling(prefix, db)
        filler = fill(outside)
        ended(proc, out)
        examine(prefix, db, out)  # still full: reading needs no space
        filler.unlink()
        return resume(prefix, db, out)


TRIALS.add("disk-full", _disk_full)


@pytest.mark.trials("disk-full")
def test_the_disk_fills_during_a_run(trials):
    out = trials["disk-full"]
    assert_one_line(out, "database write failed: disk full", "flow p is still RUNNING", "dex resume p")
    assert_sound_and_resumable(out)


# ------------------------------------------------------------------------- lock
HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()  # until the test closes stdin
conn.execute("ROLLBACK")
"""


@contextmanager
def write_lock_held(db: Path) -> Iterator[None]:
    """Another process holds the database's write lock (BEGIN IMMEDIATE) until the block ends."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.communicate("", timeout=WAIT)  # closes stdin: the holder rolls back and exits


def _locked(db: Path) -> Outcome:
    out = Outcome()
    proc = start_polling([], db, DEX_BUSY_TIMEOUT="1")
    with write_lock_held(db):
        ended(proc, out)
    examine([], db, out)
    return resume([], db, out)


def _locked_at_start(db: Path) -> Outcome:
    out = Outcome()
    assert run([], db, "run", "three-steps", "--input", "1").returncode == 0
    with write_lock_held(db):
        res = run([], db, "run", "three-steps", "--flow-id", "second", "--input", "1", DEX_BUSY_TIMEOUT="0.2")
    out.returncode, out.stderr = res.returncode, res.stderr
    out.extra["inspect"] = run([], db, "inspect", "second").returncode
    return out


TRIALS.add("locked", _locked)
TRIALS.add("locked-at-start", _locked_at_start)


@pytest.mark.trials("locked")
def test_another_process_holds_the_write_lock_past_the_busy_timeout(trials):
    out = trials["locked"]
    assert_one_line(out, "database is locked by another process (held longer than 1 s)", "dex resume p")
    assert_sound_and_resumable(out)


@pytest.mark.trials("locked-at-start")
def test_the_busy_timeout_applies_before_a_flow_starts(trials):
    out = trials["locked-at-start"]
    assert_one_line(out, "database is locked by another process (held longer than 0.2 s)")
    assert out.extra["inspect"] == 3  # nothing half-started


# ------------------------------------------------------------------------- deleted / replaced
def _deleted(db: Path) -> Outcome:
    out = Outcome()
    proc = start_polling([], db)
    db.unlink()
    ended(proc, out)
    out.extra["left"] = sorted(p.name for p in db.parent.iterdir())
    return out


def _replaced(db: Path) -> Outcome:
    out, other = Outcome(), db.parent / "other.db"
    assert run([], other, "run", "three-steps", "--flow-id", "other", "--input", "1").returncode == 0
    proc = start_polling([], db)
    os.replace(other, db)
    ended(proc, out)
    out.extra["listed"] = [f["flowId"] for f in json.loads(run([], db, "list", "--json").stdout)]
    doctor = run([], db, "doctor")
    out.doctor = f"exit {doctor.returncode}: {doctor.stdout}{doctor.stderr}"
    with sqlite3.connect(db) as conn:
        out.integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()
    return out


TRIALS.add("deleted", _deleted)
TRIALS.add("replaced", _replaced)


@pytest.mark.trials("deleted")
def test_the_database_file_is_deleted_under_a_run(trials):
    out = trials["deleted"]
    assert_one_line(out, "was deleted or replaced while dex ran")
    assert out.extra["left"] == []  # no new database, no stray -wal or -shm


@pytest.mark.trials("replaced")
def test_the_database_file_is_replaced_under_a_run(trials):
    """The file that took its place is untouched: the running process's WAL was not applied to it."""
    out = trials["replaced"]
    assert_one_line(out, "was deleted or replaced while dex ran")
    assert out.extra["listed"] == ["other"]
    assert out.doctor.startswith("exit 0") and out.integrity == "ok", (out.doctor, out.integrity)


def _locked_worker(db: Path) -> Outcome:
    """A worker drives the flow (handed over with Ctrl-C from `dex run`); another process then
    holds the write lock past the busy timeout."""
    out = Outcome()
    first = start_polling([], db)
    first.send_signal(signal.SIGINT)  # released: runnable at once by whoever drives it next
    first.communicate(timeout=WAIT)
    worker = subprocess.Popen([*DEX, "--db", str(db), "worker", "--json"], cwd=ROOT,
                              env={**ENV, "DEX_BUSY_TIMEOUT": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    assert worker.stdout is not None
    for line in worker.stdout:
        if json.loads(line)["type"] in ("heartbeat", "streamMessage"):
            break
    with write_lock_held(db):
        ended(worker, out)
    examine([], db, out)
    return resume([], db, out)


TRIALS.add("locked-worker", _locked_worker)


@pytest.mark.trials("locked-worker")
def test_a_worker_stops_with_one_line_when_the_write_lock_is_held(trials):
    out = trials["locked-worker"]
    assert_one_line(out, "database is locked by another process (held longer than 1 s)", "the worker stopped")
    assert_sound_and_resumable(out)
