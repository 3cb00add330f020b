"""Each named crash point, for the polling flow and the three-step flow: `dex run --crash-at POINT`
dies with os._exit(137), `dex resume ID --time-skip` finishes the flow, and nothing is lost or
done twice.

Both runs use --time-skip: the 6 s job and the dead attempt's 60 s heartbeat timeout take no
wall time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.crash.crashkit import (
    TEST_TIMEOUT,
    NamedTrials,
    Trial,
    Trials,
    check_recovered,
    check_victim_crashed,
    dex,
    flow_args,
    recover,
    shape,
    snapshot,
)

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)


@dataclass(frozen=True)
class Case:
    flow: str
    crash: tuple[str, ...]      # the injection options
    fires: bool = True          # does the point occur in this run at all
    lost: int = 1               # attempts the crash leaves RUNNING (declared LOST on resume)
    repeat: bool = False        # the one allowed repeat of a progress message
    step: str = ""              # where the crash happens (checked against the message)
    job: str | None = None      # --job-duration
    extra: tuple[str, ...] = ()  # e.g. --job-fails
    status: str = "COMPLETED"   # how the uncrashed run ends

    @property
    def id(self) -> str:
        bits = [self.flow, *(c.lstrip("-") for c in self.crash)]
        if self.job:
            bits.append(f"job{self.job}")
        bits += [e.lstrip("-") for e in self.extra]
        return "-".join(bits).replace(":", "_").replace("@", "_at_")


LONG = "5m"  # a job still RUNNING when the retry starts, 61 s after the crash

CASES = [
    # ---- polling: StartJob, then AwaitJob polling QUEUED (t=0) -> RUNNING (t=2 s) -> done
    Case("polling", ("--crash-at", "attempt-start"), step="StartJob-1 attempt 1"),
    Case("polling", ("--crash-at", "attempt-start@AwaitJob"), step="AwaitJob-1 attempt 1"),
    Case("polling", ("--crash-at", "attempt-start:2"), step="AwaitJob-1 attempt 1"),
    # heartbeat 1 of AwaitJob is at t=4 s, after QUEUED and RUNNING were written; it checkpoints RUNNING
    Case("polling", ("--crash-at", "heartbeat:1"), step="AwaitJob-1 attempt 1, heartbeat 1"),
    Case("polling", ("--crash-at", "heartbeat:1@AwaitJob"), step="AwaitJob-1 attempt 1, heartbeat 1", job=LONG),
    Case("polling", ("--crash-at", "heartbeat:2@AwaitJob"), step="AwaitJob-1 attempt 1, heartbeat 2", job=LONG),
    # a 6 s job succeeds at t=6 s, before any second heartbeat: the point never comes
    Case("polling", ("--crash-at", "heartbeat:2@AwaitJob"), fires=False, lost=0),
    # stream-write 1 is QUEUED; the retry (61 s later) finds the job done, or RUNNING: no repeat
    Case("polling", ("--crash-at", "stream-write:1"), step="AwaitJob-1 attempt 1, message 1"),
    Case("polling", ("--crash-at", "stream-write:1"), step="AwaitJob-1 attempt 1, message 1", job=LONG),
    # stream-write 2 is RUNNING, not checkpointed yet: a retry that finds the job still RUNNING
    # writes RUNNING again — the one repeat the seed's loop allows
    Case("polling", ("--crash-at", "stream-write:2"), step="AwaitJob-1 attempt 1, message 2"),
    Case("polling", ("--crash-at", "stream-write:2@AwaitJob"), step="AwaitJob-1 attempt 1, message 2",
         repeat=True, job=LONG),
    Case("polling", ("--crash-at", "before-commit"), step="StartJob-1 attempt 1"),
    Case("polling", ("--crash-at", "before-commit@AwaitJob"), step="AwaitJob-1 attempt 1", job=LONG),
    # the commit that completes a step also leases the next one to the same process (one commit
    # per transition): dying right after it leaves that attempt to be declared lost, like any
    # attempt running when its process died. After the last step nothing is left running.
    Case("polling", ("--crash-at", "after-commit"), lost=1, step="StartJob-1 attempt 1"),
    Case("polling", ("--crash-at", "after-commit@AwaitJob"), lost=0, step="AwaitJob-1 attempt 1"),
    # a crash at a moment: 3 s of database time is AwaitJob asleep after writing RUNNING
    Case("polling", ("--crash-after", "3s"), step="after 3 s"),
    Case("polling", ("--crash-after", "3s"), step="after 3 s", repeat=True, job=LONG),
    # failure paths end as the uncrashed run does: FAILED, with the same message
    Case("polling", ("--crash-at", "before-commit@AwaitJob"), step="AwaitJob-1 attempt 1",
         extra=("--job-fails",), status="FAILED"),
    Case("polling", ("--crash-at", "attempt-start@RecordJobWaitFailure"), step="RecordJobWaitFailure-1 attempt 1",
         job="15m", status="FAILED"),
    # ---- three steps: First -> Second -> Third, sync handlers; no heartbeats, no Stream writes
    Case("three-steps", ("--crash-at", "attempt-start"), step="First-1 attempt 1"),
    Case("three-steps", ("--crash-at", "attempt-start:2"), step="Second-1 attempt 1"),
    Case("three-steps", ("--crash-at", "attempt-start@Third"), step="Third-1 attempt 1"),
    Case("three-steps", ("--crash-at", "before-commit"), step="First-1 attempt 1"),
    Case("three-steps", ("--crash-at", "before-commit@Second"), step="Second-1 attempt 1"),
    Case("three-steps", ("--crash-at", "before-commit:3"), step="Third-1 attempt 1"),
    Case("three-steps", ("--crash-at", "after-commit"), lost=1, step="First-1 attempt 1"),
    Case("three-steps", ("--crash-at", "after-commit@Second"), lost=1, step="Second-1 attempt 1"),
    Case("three-steps", ("--crash-at", "after-commit@Third"), lost=0, step="Third-1 attempt 1"),
]
# (three-steps with heartbeat or stream-write points is refused before it runs: tests/cli/test_fault_flags.py)


def _baseline(db: Path, flow: str, job: str | None, extra: tuple[str, ...]) -> dict:
    fid = "baseline"
    args = flow_args(flow, fid) + ["--time-skip", *extra] + (["--job-duration", job] if job else [])
    p = dex(db, *args)
    s = snapshot(db, fid)
    assert p.returncode == (0 if s.status == "COMPLETED" else 1), p.describe()
    assert s.problems == [] and s.running_attempts() == []
    assert all(a["attempt"] == 1 for a in s.attempts.values())
    return shape(s, fid)


def _trial(db: Path, case: Case) -> Trial:
    fid = f"crash-{case.flow}"
    t = Trial(case.id, case.flow, fid, db)
    args = flow_args(case.flow, fid) + ["--time-skip", *case.crash]
    if case.job:
        args += ["--job-duration", case.job]
    args += case.extra
    t.victim = dex(db, *args)
    t.killed = f"exit {t.victim.returncode}"
    return recover(t, cli=case.flow == "polling")  # `dex doctor` as a process; in-process always


def baseline_name(case: Case) -> str:
    """The uncrashed run a case is compared with (cases of one flow, job and options share it)."""
    extra = "".join(case.extra).strip("-")
    return f"baseline-{case.flow}-{case.job}-{extra}"


TRIALS = Trials("crash-points", priority=2)
for _name, _case in sorted({baseline_name(c): c for c in CASES}.items()):
    TRIALS.add(_name, _baseline, _case.flow, _case.job, _case.extra)
for _case in CASES:
    TRIALS.add(_case.id, _trial, _case)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=pytest.mark.trials(c.id, baseline_name(c)))
                                  for c in CASES])
def test_crash_point_then_resume(case: Case, trials: NamedTrials):
    baseline = trials[baseline_name(case)]
    assert baseline["status"] == case.status
    t: Trial = trials[case.id]
    why = t.describe()
    if case.fires:
        what = case.crash[1].split(":")[0].split("@")[0] if case.crash[0] == "--crash-at" else "--crash-after"
        check_victim_crashed(t, what)
        assert case.step in t.victim.stderr, why
        closed_before_crash = case.crash[-1] in ("after-commit@Third", "after-commit@AwaitJob")
        assert t.pre is not None and t.pre.status == ("COMPLETED" if closed_before_crash else "RUNNING"), why
    else:
        assert t.victim.returncode == 0, why
        assert "crash injected" not in t.victim.stderr, why
        assert f"dex: warning: {case.crash[0]} {case.crash[1]} never fired" in t.victim.stderr, why
    assert len(t.pre.running_attempts()) == case.lost, why
    check_recovered(t, baseline=baseline)
    lost = [a for a in t.post.attempts.values() if a["outcome"] == "LOST"]
    assert len(lost) == case.lost, why
    if t.flow == "polling":
        assert t.notes["repeat"] == case.repeat, why
    point, _, count = case.crash[1].partition("@")[0].partition(":")
    if case.fires and point in ("heartbeat", "stream-write"):
        # the lost attempt's counters stop exactly at the crash point
        (a,) = lost
        field = "heartbeats" if point == "heartbeat" else "stream_writes"
        assert a[field] == int(count or 1), why

    if t.resume is None:
        return
    # The inspect object (`dex resume --json` ends with it) tells the same story: the lost
    # attempt, `Heartbeat`, then a success.
    assert t.inspect is not None, why
    steps = {s["stepExecutionId"]: s for s in t.inspect["steps"]}
    assert t.inspect["summary"]["flowStatus"] == f"FLOW_STATUS_{case.status}", why
    for a in lost:
        shown = steps[a["step_execution_id"]]["attempts"]
        assert [x["outcome"] for x in shown] == ["LOST", "COMPLETED"], why
        assert shown[0]["errorType"] == "Heartbeat" and shown[0]["owner"] == a["owner"], why
        assert steps[a["step_execution_id"]]["status"] == "COMPLETED", why
    if case.status == "COMPLETED":
        for s in steps.values():
            if s["stepExecutionId"] not in {a["step_execution_id"] for a in lost}:
                assert [x["outcome"] for x in s["attempts"]] == ["COMPLETED"], why
