"""A time skip never moves a flow whose lease a live process holds: that process heartbeats in
real time, and a jump of its flow's clock would make its healthy attempt's lease expire (the
attempt declared LOST, the step run again). Real processes, in real time, a few seconds each:
`dex run` of a generator step that heartbeats every 0.3 s, and from another process
`dex time skip` or `dex resume --time-skip` while it runs."""

from __future__ import annotations

import subprocess
import textwrap
import time
from contextlib import closing
from pathlib import Path

from dexcli.store import Store
from tests.cli.test_subprocess import dex, spawn

HB_FLOW = '''
import time
from collections.abc import Generator
from datetime import timedelta

from dexcli import (Context, Flow, RetryPolicy, Step, StepDecision, StepList, StepOptions, StepOutput,
                    graceful_complete, heartbeat)


class Beat(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=10), execute_retry=RetryPolicy(maximum_attempts=1))

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        for _ in range(input):
            time.sleep(0.3)
            yield heartbeat()
        return graceful_complete(input)


class HB(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Beat())
'''


def start_live_run(tmp_path: Path, beats: int) -> tuple[Path, subprocess.Popen[str]]:
    """`dex run` of the heartbeating flow `h`, returned once its attempt has heartbeated."""
    flow = tmp_path / "hb.py"
    flow.write_text(textwrap.dedent(HB_FLOW))
    db = tmp_path / "dex.db"
    proc = spawn(db, "run", "--file", f"{flow}:HB", "--flow-id", "h", "--input", str(beats))
    end = time.monotonic() + 15
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            with closing(Store(db)) as store:
                if any(a.heartbeats for a in store.attempts_of("h")):
                    return db, proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"no heartbeat within 15 s: {proc.communicate()}")


def assert_one_healthy_attempt(db: Path, proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, (out, err)
    with closing(Store(db)) as store:
        attempts = store.attempts_of("h")
        flow = store.get_flow("h")
    assert [a.outcome.value for a in attempts] == ["COMPLETED"], [(a.outcome, a.detail) for a in attempts]
    assert flow is not None and flow.status.value == "COMPLETED" and flow.clock_offset == 0.0


def test_dex_time_skip_refuses_a_flow_a_live_process_runs(tmp_path: Path) -> None:
    db, proc = start_live_run(tmp_path, beats=8)
    res = dex(db, "time", "skip", "1h", "h")
    assert res.returncode == 4, (res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dex: error: not moved: a live process runs an attempt of h "), lines
    assert f"process {proc.pid}" in lines[0] and "declared lost" in lines[0]
    assert_one_healthy_attempt(db, proc)


def test_dex_resume_time_skip_waits_for_a_live_run_instead_of_taking_it_over(tmp_path: Path) -> None:
    db, proc = start_live_run(tmp_path, beats=8)
    res = dex(db, "resume", "h", "--time-skip", "--json")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert_one_healthy_attempt(db, proc)
