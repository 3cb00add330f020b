"""Stalls, injected failures and timeouts from the command line, all in database time:
`--stall STEP[:ATTEMPT]`, `--fail STEP[:N]`, `--job-duration 15m --time-skip`, and a crash
recovered by `dex time skip` + a plain `dex resume`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.crash.crashkit import TEST_TIMEOUT, Trial, Trials, check_recovered, dex, flow_args, snapshot

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

INJECTED = "dexcli.engine.faults.InjectedError"


def _run(db: Path, flow: str, fid: str, *extra: str) -> dict[str, Any]:
    t0 = time.monotonic()
    run = dex(db, *flow_args(flow, fid), *extra)
    wall = time.monotonic() - t0
    ins = dex(db, "inspect", fid, "--json")
    assert ins.returncode == 0, ins.describe()
    return {"run": run, "wall": wall, "inspect": json.loads(ins.stdout), "snap": snapshot(db, fid)}


def _time_skip_recovery(db: Path) -> Trial:
    """No --time-skip anywhere: the crashed attempt's lease runs out because `dex time skip 2m ID`
    moves that flow's clock; a plain `dex resume` then declares it lost at once."""
    fid = "manual-skip"
    t = Trial("manual-skip", "polling", fid, db)
    t.victim = dex(db, *flow_args("polling", fid), "--crash-at", "stream-write:1")
    t.pre = snapshot(db, fid, doctor=False)
    t.notes["inspect_json"] = dex(db, "inspect", fid, "--json")
    t.notes["inspect_text"] = dex(db, "inspect", fid)
    t.notes["skip"] = dex(db, "time", "skip", "2m", fid)
    t0 = time.monotonic()
    t.resume = dex(db, "resume", fid)
    t.notes["wall"] = time.monotonic() - t0
    t.doctor = dex(db, "doctor")
    t.post = snapshot(db, fid)
    return t


CASES = {
    "stall-polling": ("polling", "--stall", "AwaitJob:1", "--time-skip"),
    "stall-three": ("three-steps", "--stall", "Second", "--time-skip"),
    "fail-polling": ("polling", "--fail", "StartJob:2", "--time-skip"),
    "fail-three": ("three-steps", "--fail", "Third:2", "--time-skip"),
    "job-15m": ("polling", "--job-duration", "15m", "--time-skip"),
}


TRIALS = Trials("faults", priority=3)
for _name, (_flow, *_extra) in CASES.items():
    TRIALS.add(_name, _run, _flow, _name, *_extra)
TRIALS.add("manual", _time_skip_recovery)


def _steps(r: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stepExecutionId"]: s for s in r["inspect"]["steps"]}


def _secs(iso_a: str, iso_b: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(iso_b.replace("Z", "+00:00"))
            - datetime.fromisoformat(iso_a.replace("Z", "+00:00"))).total_seconds()


def _clean(r: dict[str, Any]) -> None:
    assert r["snap"].problems == [], r["snap"].problems
    done = [e["payload"]["stepExecutionId"] for e in r["snap"].history if e["type"] == "StepExecuteCompleted"]
    assert len(done) == len(set(done))


def _case(name: str, seid: str) -> Any:
    return pytest.param(name, seid, marks=pytest.mark.trials(name))


@pytest.mark.parametrize("name,seid", [_case("stall-polling", "AwaitJob-1"), _case("stall-three", "Second-1")])
def test_stall_times_out_on_heartbeat_then_next_attempt_succeeds(trials, name, seid):
    r = trials[name]
    why = r["run"].describe()
    assert r["run"].returncode == 0, why
    summary = r["inspect"]["summary"]
    assert summary["flowStatus"] == "FLOW_STATUS_COMPLETED", why
    expected = "artifact for stall-polling" if name == "stall-polling" else 7
    assert [c["output"] for c in summary["completions"]] == [expected], why
    atts = _steps(r)[seid]["attempts"]
    assert [a["outcome"] for a in atts] == ["TIMED_OUT", "COMPLETED"], why
    assert atts[0]["errorType"] == "Heartbeat", why
    assert atts[0]["heartbeats"] == 0 and atts[0]["streamWrites"] == 0, why
    # the stuck attempt is given exactly its HeartbeatTimeout (60 s) of database time
    assert _secs(atts[0]["startTime"], atts[0]["endTime"]) == pytest.approx(60, abs=0.01), why
    assert _secs(atts[0]["endTime"], atts[1]["startTime"]) == pytest.approx(1, abs=0.05), why  # backoff 1 s
    assert r["wall"] < 30, f"the 60 s stall took {r['wall']:.1f} s of wall time"
    _clean(r)


@pytest.mark.parametrize("name,seid", [_case("fail-polling", "StartJob-1"), _case("fail-three", "Third-1")])
def test_injected_failures_then_success(trials, name, seid):
    r = trials[name]
    why = r["run"].describe()
    assert r["run"].returncode == 0, why
    assert r["inspect"]["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED", why
    atts = _steps(r)[seid]["attempts"]
    assert [a["outcome"] for a in atts] == ["FAILED", "FAILED", "COMPLETED"], why
    assert [a["errorType"] for a in atts[:2]] == [INJECTED, INJECTED], why
    assert "injected" in atts[0]["detail"], why
    # retries back off 1 s, then 2 s (initial 1 s, coefficient 2)
    assert _secs(atts[0]["endTime"], atts[1]["startTime"]) == pytest.approx(1, abs=0.05), why
    assert _secs(atts[1]["endTime"], atts[2]["startTime"]) == pytest.approx(2, abs=0.05), why
    others = [s for k, s in _steps(r).items() if k != seid]
    assert all([a["outcome"] for a in s["attempts"]] == ["COMPLETED"] for s in others), why
    _clean(r)


@pytest.mark.trials("job-15m")
def test_job_longer_than_max_wait_fails_the_flow(trials):
    r = trials["job-15m"]
    why = r["run"].describe()
    assert r["run"].returncode == 1, why
    summary = r["inspect"]["summary"]
    assert summary["flowStatus"] == "FLOW_STATUS_FAILED", why
    assert summary["errorType"] == "STEP_DECISION_FAILED", why
    assert summary["errorMessage"].startswith("waiting for job job-15m failed: "), why
    atts = _steps(r)["AwaitJob-1"]["attempts"]
    assert [a["outcome"] for a in atts] == ["TIMED_OUT"], why
    assert _secs(atts[0]["startTime"], atts[0]["endTime"]) == pytest.approx(600, abs=0.5), why
    assert _steps(r)["RecordJobWaitFailure-1"]["status"] == "COMPLETED", why
    assert r["wall"] < 30, f"the 10 minute wait took {r['wall']:.1f} s of wall time"
    _clean(r)


@pytest.mark.trials("job-15m")
def test_job_longer_than_max_wait_reports_start_to_close(trials):
    """The 10-minute ExecuteMethodTimeout and TotalDuration expire together; StartToClose wins."""
    r = trials["job-15m"]
    why = r["run"].describe()
    assert r["inspect"]["summary"]["errorMessage"].startswith(
        "waiting for job job-15m failed: StartToClose: activity StartToClose timeout"), why
    atts = _steps(r)["AwaitJob-1"]["attempts"]
    assert [(a["outcome"], a["errorType"]) for a in atts] == [("TIMED_OUT", "StartToClose")], why


@pytest.mark.trials("manual")
def test_crash_recovered_by_dex_time_skip_and_plain_resume(trials):
    t: Trial = trials["manual"]
    why = t.describe()
    assert t.victim.returncode == 137, why
    assert "dex resume manual-skip" in t.victim.stderr.strip().splitlines()[-1], why
    assert t.notes["skip"].returncode == 0, t.notes["skip"].describe()
    # while it waits, inspect shows the attempt of the dead process as probably lost, and when
    # its heartbeat timeout will declare it so
    text = t.notes["inspect_text"].stdout
    assert "AwaitJob-1 attempt 1 lost?" in text and "Heartbeat timeout in" in text, text
    running = {s["stepExecutionId"]: s.get("running") for s in json.loads(t.notes["inspect_json"].stdout)["steps"]}
    r = running["AwaitJob-1"]
    assert r["ownerAlive"] is False and r["nextTimeout"] == "Heartbeat", r
    assert 0 < r["secondsToTimeout"] <= 60 and r["owner"] == t.pre.attempts[("AwaitJob-1", 1)]["owner"], r
    check_recovered(t)
    lost = [a for a in t.post.attempts.values() if a["outcome"] == "LOST"]
    assert len(lost) == 1 and lost[0]["step_execution_id"] == "AwaitJob-1", why
    # the skip already put the lease 2 minutes in the past: nothing to wait for in real time
    # beyond the 6 s job itself (which the skip also finished)
    assert t.notes["wall"] < 15, why
