"""SIGHUP (a closed terminal, a dropped SSH session) stops `dex run` and `dex worker` as SIGTERM
does — the running attempt ends INTERRUPTED, exit 129 — and neither signal kills a process in
the windows where it holds a lease it has not started yet: `dex run` right after its start's
commit, `dex worker` right after its first claim.

Real processes and real signals. The windows are hit exactly, not aimed at with sleeps:
`tests.signal_at` runs `dex` with the signal sent to itself right after the named engine call
returns."""

from __future__ import annotations

import signal
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from dexcli.cli.driver import build_engine
from dexcli.engine.host import StoreHost
from dexcli.store import Store
from dexcli_flows.job_service import FakeJobService
from dexcli_flows.polling import PollingFlow
from tests.cli.cli_helpers import start_flow, subprocess_env
from tests.cli.test_clean_exits import NOISE, assert_released_and_resumes_at_once, wait_for_running_attempt
from tests.cli.test_subprocess import dex, spawn

EXIT_TERMINATED, EXIT_HUNG_UP = 143, 129  # 128 + the signal, as a shell reports it
CODES = {"SIGTERM": EXIT_TERMINATED, "SIGHUP": EXIT_HUNG_UP}
TITLES = {"SIGTERM": "Terminated (SIGTERM).", "SIGHUP": "Hung up (SIGHUP)."}


def signalled_at(db: Path, target: str, signame: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.signal_at", target, signame, "--", *args],
                          env=subprocess_env(db), capture_output=True, text=True, timeout=60)


def test_sighup_stops_dex_run_like_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    proc = spawn(db, "run", "polling", "--flow-id", "hup", "--job-duration", "60s")
    wait_for_running_attempt(db, "hup", "AwaitJob-1", proc)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == EXIT_HUNG_UP, (out, err)
    assert not any(n in err for n in NOISE), err
    assert err.startswith("Hung up (SIGHUP). Flow hup is still RUNNING in "), err
    assert "Resume it with: dex resume hup" in err and "ended INTERRUPTED" in err
    assert_released_and_resumes_at_once(db, "hup")


def test_sighup_stops_dex_worker_and_releases_its_attempt(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    start_flow(db, "polling", "wk", job_duration=60)
    proc = spawn(db, "worker")
    wait_for_running_attempt(db, "wk", "AwaitJob-1", proc)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == EXIT_HUNG_UP and err == "", (out, err)
    assert out.splitlines()[-1] == ("worker stopped (SIGHUP); 0 flow(s) finished; 1 running attempt(s) ended "
                                    "INTERRUPTED (runnable again at once: `dex resume ID` or a worker)")
    assert_released_and_resumes_at_once(db, "wk")


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_signal_right_after_dex_runs_start_commit_gives_its_lease_back(tmp_path: Path, signame: str) -> None:
    db = tmp_path / "dex.db"
    res = signalled_at(db, "dexcli.engine.core:Engine.start_flow", signame, "run", "polling", "--flow-id", "w")
    assert res.returncode == CODES[signame], (res.stdout, res.stderr)
    assert res.stderr.startswith(f"{TITLES[signame]} Flow w is still RUNNING in "), res.stderr
    assert "StartJob-1 is queued" in res.stderr and "Traceback" not in res.stderr
    with closing(Store(db)) as store:
        (step,) = store.steps_of("w")
        attempts = store.attempts_of("w")
    assert (step.status.value, step.lease_owner, step.attempt, attempts) == ("QUEUED", None, 0, [])
    done = dex(db, "resume", "w", "--time-skip", timeout=60)
    assert done.returncode == 0, (done.stdout, done.stderr)


def test_sigterm_right_after_a_workers_first_claim_releases_every_attempt(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with closing(Store(db)) as store:
        engine = build_engine(store, time_skip=False)
        for i in range(20):
            FakeJobService(StoreHost(store, engine.clock)).configure_job(f"p{i}", duration_seconds=60)
            engine.start_flow(PollingFlow(), f"p{i}", None, flow_ref="name:polling")
    res = signalled_at(db, "dexcli.engine.core:Engine._claim", "SIGTERM", "worker")
    assert res.returncode == EXIT_TERMINATED, (res.stdout, res.stderr)
    assert res.stdout.splitlines()[-1] == (
        "worker stopped (SIGTERM); 0 flow(s) finished; 20 running attempt(s) ended INTERRUPTED "
        "(runnable again at once: `dex resume ID` or a worker)"), res.stdout
    with closing(Store(db)) as store:
        steps = [s for i in range(20) for s in store.steps_of(f"p{i}")]
        attempts = [a for i in range(20) for a in store.attempts_of(f"p{i}")]
    assert {(s.status.value, s.lease_owner) for s in steps} == {("QUEUED", None)}
    assert [a.outcome.value for a in attempts] == ["INTERRUPTED"] * 20
