"""`dex worker --until-idle` as a real process: idle means nothing can run here unless a timer
fires or someone acts, so a flow waiting on a 24 h timer does not hold it (it says what it
leaves waiting, and exits); while attempts of a process that is gone time out in real time,
it says what it waits for, until when, and that --time-skip skips it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from dexcli.store import Store
from tests.cli.cli_helpers import start_flow, subprocess_env

DEX = [sys.executable, "-m", "dexcli"]


def dex(db: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DEX, *args], env=subprocess_env(db), capture_output=True, text=True, timeout=timeout)


def status(db: Path, flow_id: str) -> str:
    store = Store(db)
    try:
        flow = store.get_flow(flow_id)
        assert flow is not None
        return flow.status.value
    finally:
        store.close()


def test_until_idle_leaves_a_flow_waiting_on_a_long_timer_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    start_flow(db, "approval", "a1", {"title": "Laptop"})  # a decision, or its 24 h timer
    start_flow(db, "three-steps", "t1", 1)
    _start_delayed(db, "later")
    res = dex(db, "worker", "--until-idle")  # on main it waits for the timer: TimeoutExpired
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "t1: COMPLETED" in lines and "idle: 1 flow(s) finished" in lines
    assert "2 flow(s) left waiting for a timer or an outside event:" in lines
    [a1] = [ln for ln in lines if ln.startswith("  a1: ")]
    # a timer fires at its commit time rounded down to the second (rule 17): up to 1 s less is left
    assert re.search(r"AwaitDecision-1 waiting for any of: timer expire fires in (24 h|23 h 59 m)", a1), a1
    assert "decisions" in a1
    [later] = [ln for ln in lines if ln.startswith("  later: ")]
    assert later.startswith("  later: First-1 starts at ") and later.endswith("(a start delay)")
    assert lines[-1].endswith("a worker without --until-idle waits for them; --time-skip jumps to their timers")
    assert status(db, "a1") == "RUNNING" and status(db, "later") == "RUNNING"


def _start_delayed(db: Path, flow_id: str) -> None:
    """A three-step flow whose first step starts in an hour (a start delay), not driven."""
    from datetime import timedelta

    from dexcli import StartFlowOptions
    from dexcli.cli.driver import build_engine
    from dexcli_flows.three_steps import ThreeStepFlow

    store = Store(db)
    try:
        build_engine(store, time_skip=False).start_flow(ThreeStepFlow(), flow_id, 1, flow_ref="name:three-steps",
                                                        options=StartFlowOptions(start_delay=timedelta(hours=1)))
    finally:
        store.close()


def test_until_idle_says_what_it_waits_for_while_a_dead_processs_attempt_times_out(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    crashed = dex(db, "run", "polling", "--flow-id", "p", "--crash-at", "heartbeat:1", "--time-skip")
    assert crashed.returncode == 137, crashed.stderr  # AwaitJob-1 stays RUNNING, its process gone
    worker = subprocess.Popen([*DEX, "worker", "--until-idle"], env=subprocess_env(db), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        banner, line = worker.stdout.readline(), worker.stdout.readline()  # blocks until it says something
        assert "until idle" in banner
        assert line.startswith("waiting until "), line
        assert ("for AwaitJob-1 of flow p (attempt 1), whose process is gone, to time out: then it is declared "
                "lost and retried · --time-skip skips this wait") in line
        in_seconds = float(line.split("(in ")[1].split(" s)")[0])
        assert 30 < in_seconds <= 60  # its heartbeat deadline: 60 s after the last heartbeat
        assert worker.poll() is None
    finally:
        worker.terminate()
        worker.communicate(timeout=30)
    res = dex(db, "worker", "--until-idle", "--time-skip")  # within the 30 s timeout: not the 60 s wait
    assert res.returncode == 0 and "p: COMPLETED" in res.stdout, res.stdout + res.stderr
    assert "waiting" not in res.stdout
