"""A process that starts a flow with its first attempt leased (`Engine.start_flow(lease=True)`,
what `dex run` does) and dies before it drives it: the lease is a crashed owner's. A later
`dex resume --time-skip` (or a worker) declares the attempt lost at its heartbeat deadline, retries
it, and the flow completes with nothing done twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.crash.crashkit import ENV, HEARTBEAT_TIMEOUT, ROOT, STEP_TIMEOUT, TEST_TIMEOUT, dex, owner_pid, snapshot

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

FLOW_ID = "lease-crash"

VICTIM = f"""
import os, sys
from dexcli.cli.driver import build_engine
from dexcli.cli.loader import load_flow
from dexcli.store import Store

engine = build_engine(Store(sys.argv[1]), time_skip=False)
flow, ref = load_flow("three-steps")
engine.start_flow(flow, {FLOW_ID!r}, 4, flow_ref=ref, lease=True)
os._exit(137)  # before any run(): nothing drives the leased attempt
"""


def _start_and_die(db: Path) -> None:
    p = subprocess.run([sys.executable, "-c", VICTIM, str(db)], cwd=ROOT, env=ENV, text=True,
                       capture_output=True, timeout=STEP_TIMEOUT)
    assert p.returncode == 137, p.stderr


@pytest.mark.parametrize("recover", [("resume", FLOW_ID, "--time-skip"), ("worker", "--until-idle", "--time-skip")],
                         ids=["resume", "worker"])
def test_a_leased_start_whose_process_dies_is_recovered_like_a_crashed_owner(tmp_path: Path,
                                                                             recover: tuple[str, ...]) -> None:
    db = tmp_path / "dex.db"
    _start_and_die(db)
    pre = snapshot(db, FLOW_ID, doctor=False)
    assert pre.status == "RUNNING"
    assert pre.steps["First-1"]["status"] == "RUNNING"
    (held,) = pre.running_attempts()
    assert (held["step_execution_id"], held["attempt"]) == ("First-1", 1)
    assert owner_pid(held["owner"]) is not None  # leased to the process that died

    rec = dex(db, *recover)
    assert rec.returncode == 0, rec.describe()
    post = snapshot(db, FLOW_ID)
    assert post.status == "COMPLETED", rec.describe()
    assert post.outputs() == [2 * 4 + 5]
    lost, retried = post.attempts[("First-1", 1)], post.attempts[("First-1", 2)]
    assert lost["outcome"] == "LOST" and retried["outcome"] == "COMPLETED"
    assert lost["end_time"] - lost["start_time"] == pytest.approx(HEARTBEAT_TIMEOUT, abs=1)
    assert [k for k in post.attempts if k[0] != "First-1"] == [("Second-1", 1), ("Third-1", 1)]
    assert post.problems == []
