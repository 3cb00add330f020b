"""Real processes: `python -m dexcli` end to end, two processes on one database, `dex watch`.

Only the two-process tests run in real time, and they are bounded (a few seconds each).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from dexcli.store import Store
from tests.cli.cli_helpers import parse_iso_seconds, subprocess_env

DEX = [sys.executable, "-m", "dexcli"]


def dex(db: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DEX, *args], env=subprocess_env(db), capture_output=True, text=True, timeout=timeout)


def spawn(db: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*DEX, *args], env=subprocess_env(db), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for_stream(db: Path, flow_id: str, proc: subprocess.Popen[str], deadline_s: float = 8.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            store = Store(db)
            try:
                if store.get_flow(flow_id) is not None and store.stream_messages(flow_id):
                    return
            finally:
                store.close()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no stream message for {flow_id} within {deadline_s} s: {proc.communicate()}")


def test_run_polling_end_to_end_in_virtual_time(tmp_path):
    db = tmp_path / "dex.db"
    res = dex(db, "run", "polling", "--flow-id", "demo", "--time-skip")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    out = res.stdout
    assert "JobProgress QUEUED" in out and "JobProgress RUNNING" in out
    assert 'COMPLETED in 6.' in out and 'result: "artifact for demo"' in out
    assert "\x1b[" not in out
    snap = json.loads(dex(db, "inspect", "demo", "--json").stdout)
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    doc = dex(db, "doctor")
    assert doc.returncode == 0 and doc.stdout.strip().endswith("0 problem(s)")


def test_complete_job_from_a_second_process_finishes_the_first_early(tmp_path):
    db = tmp_path / "dex.db"
    t0 = time.monotonic()
    first = spawn(db, "run", "polling", "--flow-id", "demo", "--job-duration", "60s")
    try:
        wait_for_stream(db, "demo", first)
        second = dex(db, "complete-job", "demo", timeout=10)
        assert second.returncode == 0, second.stderr
        assert "job demo completed: SUCCEEDED" in second.stdout
        out, err = first.communicate(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    assert time.monotonic() - t0 < 15
    assert 'result: "artifact for demo"' in out
    snap = json.loads(dex(db, "inspect", "demo", "--json").stdout)
    s = snap["summary"]
    assert s["flowStatus"] == "FLOW_STATUS_COMPLETED" and s["completions"][0]["output"] == "artifact for demo"
    assert parse_iso_seconds(s["closeTime"]) - parse_iso_seconds(s["startTime"]) < 10  # not 60 s


def test_watch_follows_a_flow_run_by_another_process(tmp_path):
    db = tmp_path / "dex.db"
    runner = spawn(db, "run", "polling", "--flow-id", "w", "--job-duration", "3s")
    try:
        wait_for_stream(db, "w", runner)
        watch = dex(db, "watch", "w", timeout=15)
        out, err = runner.communicate(timeout=10)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 0, err
    assert watch.returncode == 0, watch.stderr
    w = watch.stdout
    assert w.splitlines()[0].startswith(" dex · PollingFlow · w · db ")
    for expected in ("StartJob-1 goTo AwaitJob", "✉ JobProgress QUEUED", "✉ JobProgress RUNNING",
                     "AwaitJob-1 gracefulComplete", 'COMPLETED in', 'result: "artifact for w"'):
        assert expected in w, (expected, w)
    assert w.index("JobProgress QUEUED") < w.index("JobProgress RUNNING") < w.index("COMPLETED in")
    # watch is read-only: the flow's events were all written by the runner
    snap = json.loads(dex(db, "inspect", "w", "--json").stdout)
    owners = {a["owner"] for st in snap["steps"] for a in st["attempts"]}
    assert len(owners) == 1


def test_watch_of_an_ended_flow_exits_at_once_with_its_status(tmp_path):
    db = tmp_path / "dex.db"
    assert dex(db, "run", "polling", "--flow-id", "bad", "--job-fails", "--time-skip").returncode == 1
    res = dex(db, "watch", "bad")
    assert res.returncode == 1 and "FAILED" in res.stdout


def test_ctrl_c_leaves_the_flow_running_and_says_how_to_resume(tmp_path):
    import signal

    db = tmp_path / "dex.db"
    proc = spawn(db, "run", "polling", "--flow-id", "sig", "--job-duration", "60s")
    wait_for_stream(db, "sig", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert "dex resume sig" in err and "still RUNNING" in err and "ended INTERRUPTED" in err
    assert "AwaitJob-1 attempt 1/3 interrupted: its process stopped" in out  # no error type to print
    snap = json.loads(dex(db, "inspect", "sig", "--json").stdout)
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING"
    assert [m["value"]["state"] for m in snap["streams"]["JobProgress"]][:1] == ["QUEUED"]
    await_job = next(s for s in snap["steps"] if s["stepType"] == "AwaitJob")
    assert await_job["status"] == "QUEUED"  # released: runnable at once, no lease to wait out
    # what was committed before the interrupt is intact: resume finishes the flow with the job's
    # result, its next attempt starting at once (not after the 60 s heartbeat timeout)
    done = dex(db, "resume", "sig", "--time-skip", timeout=60)
    assert done.returncode == 0, done.stderr
    snap = json.loads(dex(db, "inspect", "sig", "--json").stdout)
    assert snap["summary"]["completions"][0]["output"] == "artifact for sig"
    await_job = next(s for s in snap["steps"] if s["stepType"] == "AwaitJob")
    first, second = await_job["attempts"]
    assert (first["outcome"], second["outcome"]) == ("INTERRUPTED", "COMPLETED")
    assert parse_iso_seconds(second["startTime"]) - parse_iso_seconds(first["endTime"]) < 5
