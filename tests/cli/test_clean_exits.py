"""Clean exits: a closed stdout or SIGTERM stops `dex run` / `dex watch` / `dex worker` at once,
quietly, with the shell's exit code for it (141, 143), and the attempts they were running are
released (INTERRUPTED) so `dex resume` starts the next one at once.

Real processes on real pipes, in real time; each test is bounded to a few seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dexcli.cli.stopping import (
    CLOSED,
    EXIT_OUTPUT_CLOSED,
    EXIT_TERMINATED,
    TERMINATED,
    PipeWatch,
    StopRequest,
    is_closed_pipe,
)
from dexcli.store import Store
from tests.cli.cli_helpers import parse_iso_seconds, start_flow
from tests.cli.test_subprocess import dex, spawn, wait_for_stream

NOISE = ("Traceback", "Exception ignored", "BrokenPipeError", "Error")


def steps_of(db: Path, flow_id: str) -> dict[str, Any]:
    res = dex(db, "inspect", flow_id, "--json")
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout)
    return {st["stepType"]: st for st in snap["steps"]} | {"summary": snap["summary"]}


def wait_for_running_attempt(db: Path, flow_id: str, seid: str, proc: subprocess.Popen[str],
                             deadline_s: float = 10.0, heartbeats: int = 0) -> None:
    """Until the process holds an open (RUNNING) attempt of that step execution (that has
    recorded at least `heartbeats` heartbeats)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        store = Store(db)
        try:
            if any(a.step_execution_id == seid and a.end_time is None and a.heartbeats >= heartbeats
                   for a in store.attempts_of(flow_id)):
                return
        finally:
            store.close()
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no running attempt of {seid} within {deadline_s} s: {proc.communicate()}")


def assert_released_and_resumes_at_once(db: Path, flow_id: str) -> None:
    """The AwaitJob attempt ended INTERRUPTED and its step is runnable now (QUEUED, no owner, due
    when released); `dex resume --time-skip` finishes the flow with the next attempt starting at
    once — not after the 60 s heartbeat timeout, which --time-skip would have jumped the
    database clock over. Read in-process: no extra process start between release and resume."""
    store = Store(db)
    try:
        flow = store.get_flow(flow_id)
        step = next(s for s in store.steps_of(flow_id) if s.step_execution_id == "AwaitJob-1")
        attempts = [a for a in store.attempts_of(flow_id) if a.step_execution_id == "AwaitJob-1"]
    finally:
        store.close()
    assert flow is not None and flow.is_running
    assert [a.outcome.value for a in attempts] == ["INTERRUPTED"]
    ended = attempts[0].end_time
    assert ended is not None
    assert step.status.value == "QUEUED" and step.lease_owner is None
    assert step.next_attempt_at is not None and step.next_attempt_at <= ended
    done = dex(db, "resume", flow_id, "--time-skip", timeout=60)
    assert done.returncode == 0, (done.stdout, done.stderr)
    steps = steps_of(db, flow_id)
    assert steps["summary"]["completions"][0]["output"] == f"artifact for {flow_id}"
    first, second = steps["AwaitJob"]["attempts"]
    assert (first["outcome"], second["outcome"]) == ("INTERRUPTED", "COMPLETED")
    assert parse_iso_seconds(second["startTime"]) - parse_iso_seconds(first["endTime"]) < 5


def close_after_one_line(proc: subprocess.Popen[str]) -> float:
    """Read one line of the process's stdout, close our end; return how long it then took to exit."""
    assert proc.stdout is not None
    assert proc.stdout.readline()
    proc.stdout.close()
    closed_at = time.monotonic()
    try:
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - closed_at


def stderr_of(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    with proc.stderr:
        return proc.stderr.read()


@pytest.mark.parametrize("json_out", [True, False], ids=["json", "plain"])
def test_a_closed_stdout_stops_dex_run_at_once_and_releases_its_attempt(tmp_path: Path, json_out: bool) -> None:
    db = tmp_path / "dex.db"
    fid = "pipe-json" if json_out else "pipe-plain"
    proc = spawn(db, "run", "polling", "--flow-id", fid, "--job-duration", "60s", *(["--json"] if json_out else []))
    wait_for_stream(db, fid, proc)  # AwaitJob is running: the flow is mid-run
    took = close_after_one_line(proc)
    err = stderr_of(proc)
    assert took < 2, (took, err)
    assert proc.returncode == EXIT_OUTPUT_CLOSED, err
    assert not any(n in err for n in NOISE), err
    assert err.splitlines() == [f"dex: output closed; flow {fid} is still RUNNING — resume it with: dex resume {fid}"
                                " (its running attempt ended INTERRUPTED: the next one starts at once)"]
    assert_released_and_resumes_at_once(db, fid)


def test_a_closed_stdout_ends_dex_watch_quietly(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    start_flow(db, "polling", "watched", job_duration=60)  # queued; nobody drives it, watch would never end
    proc = spawn(db, "watch", "watched")
    took = close_after_one_line(proc)
    err = stderr_of(proc)
    assert took < 2, (took, err)
    assert proc.returncode == EXIT_OUTPUT_CLOSED and err == "", err


def test_sigterm_stops_dex_worker_and_releases_its_attempt(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    start_flow(db, "polling", "wk", job_duration=60)
    proc = spawn(db, "worker")
    wait_for_running_attempt(db, "wk", "AwaitJob-1", proc)
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    out, err = proc.communicate(timeout=10)
    assert time.monotonic() - sent < 2, (out, err)
    assert proc.returncode == EXIT_TERMINATED, (out, err)
    assert err == ""
    assert out.splitlines()[-1] == ("worker stopped (SIGTERM); 0 flow(s) finished; 1 running attempt(s) ended "
                                    "INTERRUPTED (runnable again at once: `dex resume ID` or a worker)")
    assert_released_and_resumes_at_once(db, "wk")


def test_sigterm_stops_dex_run_like_ctrl_c(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    proc = spawn(db, "run", "polling", "--flow-id", "term", "--job-duration", "60s")
    wait_for_running_attempt(db, "term", "AwaitJob-1", proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == EXIT_TERMINATED, (out, err)
    assert not any(n in err for n in NOISE), err
    assert err.startswith("Terminated (SIGTERM). Flow term is still RUNNING in ")
    assert "Resume it with: dex resume term" in err and "ended INTERRUPTED" in err
    assert_released_and_resumes_at_once(db, "term")


SWALLOWING_FLOW = """
import asyncio

from dexcli import AsyncContext, Flow, Step, StepDecision, StepList, graceful_complete


class Slow(Step[None]):
    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        await context.heartbeat()  # the test stops it once this is recorded: it is in its sleep
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass  # as asyncio.wait_for (3.11) does when its call finishes as the cancellation comes
        return graceful_complete("too late")


class SlowFlow(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Slow())
"""


@pytest.mark.parametrize("how", ["closed-stdout", "sigint"])
def test_an_attempt_that_swallows_the_stop_is_released_too(tmp_path: Path, how: str) -> None:
    """`dex run polling --json | head -1` could leave an attempt RUNNING to its heartbeat timeout:
    its handler was in asyncio.wait_for, which swallowed the stop's cancellation, so the attempt
    ended without being counted as interrupted. Any handler that swallows it is released too."""
    db, path = tmp_path / "dex.db", tmp_path / "slow.py"
    path.write_text(SWALLOWING_FLOW)
    proc = spawn(db, "run", "--file", f"{path}:SlowFlow", "--flow-id", "s", "--json")
    wait_for_running_attempt(db, "s", "Slow-1", proc, heartbeats=1)
    if how == "sigint":
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=10)
        assert proc.returncode == 130
    else:
        close_after_one_line(proc)
        err = stderr_of(proc)
        assert proc.returncode == EXIT_OUTPUT_CLOSED, err
        assert err.splitlines() == ["dex: output closed; flow s is still RUNNING — resume it with: dex resume s"
                                    " (its running attempt ended INTERRUPTED: the next one starts at once)"]
    store = Store(db)
    try:
        [step] = store.steps_of("s")
        assert [a.outcome.value for a in store.attempts_of("s")] == ["INTERRUPTED"]
    finally:
        store.close()
    assert step.status.value == "QUEUED" and step.lease_owner is None


@pytest.mark.parametrize("args", [["list"], ["inspect", "f0", "--json"], ["inspect", "f0"]])
def test_a_closed_stdout_ends_other_commands_with_141_too(tmp_path: Path, args: list[str]) -> None:
    """Typer ends a command whose write fails with EPIPE with exit 1; dex exits 141, quietly."""
    db = tmp_path / "dex.db"
    start_flow(db, "three-steps", "f0", input=1)
    proc = spawn(db, *args)
    assert proc.stdout is not None
    proc.stdout.close()  # before the command writes anything
    proc.wait(timeout=30)
    err = stderr_of(proc)
    assert proc.returncode == EXIT_OUTPUT_CLOSED and err == "", err


# ------------------------------------------------------------------------- the parts, in-process
def test_the_first_reason_to_stop_stays_and_a_closed_output_is_remembered() -> None:
    stop = StopRequest()
    assert not stop()
    stop.set(TERMINATED)
    stop.set(CLOSED)
    assert stop() and stop.reason == TERMINATED and stop.output_closed


def test_closed_pipe_errors_are_recognised() -> None:
    import errno

    assert is_closed_pipe(BrokenPipeError()) and is_closed_pipe(OSError(errno.EPIPE, "pipe"))
    assert not is_closed_pipe(OSError(errno.ENOSPC, "disk full")) and not is_closed_pipe(ValueError())


def test_the_pipe_watch_notices_a_closed_reader_without_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.pipe()
    with os.fdopen(w, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        stop = StopRequest()
        watch = PipeWatch(lambda: stop.set(CLOSED), interval=0.01)
        watch.start()
        try:
            time.sleep(0.05)
            assert not stop()
            os.close(r)
            end = time.monotonic() + 2
            while not stop() and time.monotonic() < end:
                time.sleep(0.01)
        finally:
            watch.stop()
        assert stop.reason == CLOSED


def test_the_output_console_reports_a_closed_pipe_instead_of_exiting_the_thread() -> None:
    """Rich's default on a broken pipe points stdout at /dev/null and raises SystemExit in the
    printing thread: in the live view's thread that hid the closed pipe from dex (the drive
    went on). dex's console raises BrokenPipeError for the caller to handle."""
    from dexcli.cli.app import out_console

    read_end, write_end = os.pipe()
    os.close(read_end)
    console = out_console()
    console.file = os.fdopen(write_end, "w")
    try:
        with pytest.raises(BrokenPipeError):
            console.print("x" * 100_000)
    finally:
        with contextlib.suppress(OSError):
            console.file.close()
