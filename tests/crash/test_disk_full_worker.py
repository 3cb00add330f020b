"""The disk fills under `dex worker` draining many flows (a tmpfs of its own, filled from
outside once the worker is busy). The worker says so in one line; the leases it held, which it
cannot release on a full disk, are marked stopped beside the database; once space is freed the
next worker releases them at once (INTERRUPTED, not LOST after a heartbeat timeout) and
finishes every flow. With no dex process open and the disk still full, every command — reads
included — says "disk full" in one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dexcli.cli.driver import build_engine
from dexcli.store import Store
from dexcli_flows.three_steps import ThreeStepFlow
from tests.crash.crashkit import ENV, ROOT, TEST_TIMEOUT, Trials
from tests.crash.test_bad_conditions import DEX, WAIT, fill, run, small_tmpfs

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

N_FLOWS = 1000  # enough that the worker is still draining when the disk fills (300 could all end first)
TRIALS = Trials("disk-full-worker", priority=0)


def _rows(prefix: list[str], db: Path, sql: str) -> list[Any]:
    """Rows read inside the tmpfs's namespace (the database's -shm lives there)."""
    res = subprocess.run([*prefix, sys.executable, "-c", "import json, sqlite3, sys; print(json.dumps("
                          "sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()))", str(db), sql],
                         capture_output=True, text=True, timeout=WAIT)
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout))


def _scenario(db: Path) -> dict[str, Any]:
    made = db.parent / "made.db"
    with closing(Store(made)) as store:  # made on the real disk: the tmpfs is for the worker's writes
        engine = build_engine(store, time_skip=False)
        for i in range(N_FLOWS):
            engine.start_flow(ThreeStepFlow(), f"w{i:03d}", i, flow_ref="name:three-steps")
    point = db.parent / "small"
    with small_tmpfs(point, "64m") as (prefix, outside):
        shutil.copy(made, outside / "dex.db")
        db = point / "dex.db"
        worker = subprocess.Popen([*prefix, *DEX, "--db", str(db), "worker"], cwd=ROOT, env=ENV,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert worker.stdout is not None
        for _ in range(6):  # its header, then 5 flows finished: it is busy
            assert worker.stdout.readline(), worker.communicate(timeout=WAIT)
        filler = fill(outside)
        out, err = worker.communicate(timeout=WAIT)
        result: dict[str, Any] = {"code": worker.returncode, "stdout": out, "stderr": err}
        result["running"] = _rows(prefix, db, "SELECT COUNT(*) FROM steps WHERE status = 'RUNNING'")[0][0]
        result["marks"] = sorted(p.name for p in outside.glob("dex.db-stopped-*"))
        filler.unlink()
        t0 = time.monotonic()
        result["again"] = run(prefix, db, "worker", "--until-idle")
        result["again_wall"] = time.monotonic() - t0
        result["outcomes"] = dict(_rows(prefix, db, "SELECT outcome, COUNT(*) FROM attempts GROUP BY 1"))
        result["statuses"] = dict(_rows(prefix, db, "SELECT status, COUNT(*) FROM flows GROUP BY 1"))
        result["marks_after"] = sorted(p.name for p in outside.glob("dex.db-stopped-*"))
        result["doctor"] = run(prefix, db, "doctor")
    return result


def _read_when_full(db: Path) -> subprocess.CompletedProcess[str]:
    """A database no process has open (no -wal or -shm beside it) on a full disk."""
    made = db.parent / "made.db"
    with closing(Store(made)) as store:
        build_engine(store, time_skip=False).start_flow(ThreeStepFlow(), "one", 1, flow_ref="name:three-steps")
    point = db.parent / "small"
    with small_tmpfs(point) as (prefix, outside):
        shutil.copy(made, outside / "dex.db")
        fill(outside)
        return run(prefix, point / "dex.db", "list", "--limit", "1")


TRIALS.add("drain", _scenario)
TRIALS.add("read-full", _read_when_full)


@pytest.mark.trials("drain")
def test_a_full_disk_stops_a_worker_in_one_line_and_the_next_worker_loses_nothing(trials: Any) -> None:
    r = trials["drain"]
    why = {k: v for k, v in r.items() if k != "stdout"}
    assert r["code"] == 5, why  # environment: the disk is full
    lines = r["stderr"].splitlines()
    assert len(lines) == 1 and lines[0].startswith("dex: error: database write failed: disk full"), why
    assert "Traceback" not in r["stdout"] and "could not be recorded" not in r["stdout"], why
    assert r["running"] > 0, why  # it held leases it could not release: they are marked
    assert len(r["marks"]) == 1, why
    again = r["again"]
    assert again.returncode == 0 and again.stderr == "", why
    assert r["again_wall"] < 30, why  # no heartbeat timeout (60 s) waited out
    assert r["statuses"] == {"COMPLETED": N_FLOWS}, why
    assert "LOST" not in r["outcomes"] and r["outcomes"].get("INTERRUPTED") == r["running"], why
    assert r["outcomes"]["COMPLETED"] == 3 * N_FLOWS, why
    assert r["marks_after"] == [], why
    assert r["doctor"].returncode == 0 and "0 problem(s)" in r["doctor"].stdout, why


@pytest.mark.trials("read-full")
def test_with_the_disk_full_and_no_dex_open_a_read_says_disk_full(trials: Any) -> None:
    res = trials["read-full"]
    assert res.returncode == 5, (res.stdout, res.stderr)
    assert res.stderr.splitlines() == [
        f"dex: error: cannot open the database {res.args[res.args.index('--db') + 1]}: disk full (SQLite needs "
        "room beside it for its -wal and -shm files, even to read)"], res.stderr
