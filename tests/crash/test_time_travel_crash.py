"""Time travel with real processes that die: a three-steps flow whose start was leased to a process
that died (First-1 RUNNING, its owner gone) is time travelled by another process that dies
- in the middle of the time travel's transaction (os._exit inside it): nothing of it is left,
  the flow has its one run, and `dex resume` completes it;
- right after it committed (os._exit before anything drives the new run, and SIGKILL of a
  `dex time-travel` then `dex resume` in a row): the old run stays archived as it was closed
  (TERMINATED, First-1 cancelled, its history as then), and `dex resume` finishes the new run
  once: each step one completed attempt, one result (a drive SIGKILLed mid-way leaves one
  attempt LOST, retried)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.crash.crashkit import ENV, ROOT, STEP_TIMEOUT, TEST_TIMEOUT, dex, snapshot

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

FLOW_ID = "tt"

START_AND_DIE = f"""
import os, sys
from dexcli.cli.driver import build_engine
from dexcli.cli.loader import load_flow
from dexcli.store import Store

engine = build_engine(Store(sys.argv[1]), time_skip=False)
flow, ref = load_flow("three-steps")
engine.start_flow(flow, {FLOW_ID!r}, 4, flow_ref=ref, lease=True)
os._exit(137)  # First-1 stays leased to this dead process
"""

TRAVEL_AND_DIE = f"""
import os, sys
from dexcli.cli.driver import build_engine
from dexcli.engine import TimeTravelRequest
from dexcli.store import Store
from dexcli.store.tx import Tx

if sys.argv[2] == "inside":  # die in the transaction, after the old run is archived and the new one made
    def copy_steps(self, source, target, seids):
        os._exit(137)
    Tx.copy_steps = copy_steps
engine = build_engine(Store(sys.argv[1]), time_skip=False)
print(engine.change(TimeTravelRequest({FLOW_ID!r}, "BEGINNING", reason="crash test")), flush=True)
os._exit(137)  # committed: nothing drives the new run
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=ENV, text=True, capture_output=True,
                       timeout=STEP_TIMEOUT)
    assert p.returncode == 137, p.stderr
    return p


def _leased_start(db: Path) -> str:
    _run(START_AND_DIE, str(db))
    pre = snapshot(db, FLOW_ID, doctor=False)
    assert pre.status == "RUNNING" and pre.steps["First-1"]["status"] == "RUNNING"
    assert pre.flow is not None
    return str(pre.flow["run_id"])


def _finished_once(db: Path, new_run: str) -> None:
    post = snapshot(db, FLOW_ID)
    assert post.flow is not None and post.flow["run_id"] == new_run
    assert post.status == "COMPLETED" and post.outputs() == [2 * (4 + 1) + 3]
    completed = Counter(seid for (seid, _), a in post.attempts.items() if a["outcome"] == "COMPLETED")
    assert completed == {"First-1": 1, "Second-1": 1, "Third-1": 1}
    assert {a["outcome"] for a in post.attempts.values()} <= {"COMPLETED", "LOST"}  # LOST: the killed drive's
    assert [e["type"] for e in post.history][:2] == ["FlowStarted", "TimeTravelFork"]
    assert post.problems == []


def _old_run_intact(db: Path, old_run: str) -> None:
    old = snapshot(db, f"{FLOW_ID}${old_run}", doctor=False)
    assert old.status == "TERMINATED"
    assert old.steps["First-1"]["status"] == "CANCELED"
    assert [e["type"] for e in old.history] == ["FlowStarted", "FlowClosed"]


def test_a_time_travel_killed_inside_its_transaction_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    old_run = _leased_start(db)
    before = snapshot(db, FLOW_ID, doctor=False)
    _run(TRAVEL_AND_DIE, str(db), "inside")
    after = snapshot(db, FLOW_ID, doctor=False)
    assert after.flow == before.flow and after.steps == before.steps and after.history == before.history
    assert snapshot(db, f"{FLOW_ID}${old_run}", doctor=False).flow is None  # nothing archived
    rec = dex(db, "resume", FLOW_ID, "--time-skip")
    assert rec.returncode == 0, rec.describe()
    assert snapshot(db, FLOW_ID).outputs() == [13]


def test_a_process_dying_right_after_a_time_travel_leaves_a_new_run_that_finishes_once(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    old_run = _leased_start(db)
    new_run = _run(TRAVEL_AND_DIE, str(db), "after").stdout.strip()
    assert new_run and new_run != old_run
    _old_run_intact(db, old_run)
    rec = dex(db, "resume", FLOW_ID, "--time-skip")
    assert rec.returncode == 0, rec.describe()
    _finished_once(db, new_run)
    _old_run_intact(db, old_run)


def test_a_resume_killed_after_a_cli_time_travel_is_resumed_and_finishes_once(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    old_run = _leased_start(db)
    travel = dex(db, "time-travel", FLOW_ID, "--to-start", "--reason", "crash test")
    assert travel.returncode == 0, travel.describe()
    new_run = travel.stdout.strip()
    killed = subprocess.run([sys.executable, "-c", (
        "import os, sys\n"
        "from dexcli.cli.driver import build_engine\n"
        "from dexcli.store import Store\n"
        "store = Store(sys.argv[1])\n"
        "engine = build_engine(store, time_skip=True)\n"
        # SIGKILL itself once the new run's First-1 has completed: mid-drive, after a commit
        "engine.events.listeners.append(lambda e: e.type == 'stepCompleted' and os.kill(os.getpid(), 9))\n"
        f"engine.drive([{FLOW_ID!r}])\n"), str(db)], cwd=ROOT, env=ENV, capture_output=True, text=True,
        timeout=STEP_TIMEOUT)
    assert killed.returncode == -9, killed.stderr
    mid = snapshot(db, FLOW_ID, doctor=False)
    assert mid.steps["First-1"]["status"] == "COMPLETED" and mid.status == "RUNNING"
    rec = dex(db, "resume", FLOW_ID, "--time-skip")
    assert rec.returncode == 0, rec.describe()
    _finished_once(db, new_run)
    _old_run_intact(db, old_run)
