"""Fault flags that cannot fire are refused before anything runs (exit 2, nothing written);
one that could but did not fire in a run is named on stderr at its end (the exit code stays
the flow's). The crash cases run `dex` as a real process: a crash that fired would os._exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.store import Store
from tests.cli.cli_helpers import assert_error, subprocess_env

PAYMENT = '{"payment_id": "p-1", "amount": 5}'


def dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", *args], env=subprocess_env(db), capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("args, fragment", [
    (("three-steps", "--input", "1", "--crash-at", "stream-write:1"), "flow ThreeStepFlow declares no Stream"),
    (("payment", "--input", PAYMENT, "--crash-at", "stream-write"), "flow PaymentFlow declares no Stream"),
    (("three-steps", "--input", "1", "--crash-at", "heartbeat:1"),
     "every step of flow ThreeStepFlow is a plain sync handler: it can neither heartbeat nor write to a Stream"),
    (("payment", "--input", PAYMENT, "--crash-at", "heartbeat@RecordSettlement"),
     "--crash-at heartbeat@RecordSettlement: RecordSettlement's execute is a plain sync handler"),
    (("polling", "--stall", "AwaitJob:4"), "AwaitJob runs at most 3 attempts per method"),
    (("polling", "--crash-at", "heartbeat@Nope"), "the flow has no step 'Nope'"),
])
def test_a_fault_that_cannot_happen_is_refused_before_the_run(cli, db, args, fragment):
    assert_error(cli("run", *args, "--time-skip", "--flow-id", "f"), 2, fragment)
    if db.exists():
        store = Store(db)
        try:
            assert store.get_flow("f") is None
        finally:
            store.close()


def test_a_crash_point_the_run_never_reaches_is_named_at_the_end(db):
    # the default job heartbeats once: there is no second heartbeat to crash at
    res = dex(db, "run", "polling", "--flow-id", "p", "--crash-at", "heartbeat:2@AwaitJob", "--time-skip")
    assert res.returncode == 0, res.stderr  # the flow COMPLETED: its exit code
    assert res.stderr == ("dex: warning: --crash-at heartbeat:2@AwaitJob never fired: the attempts of AwaitJob "
                          "committed at most 1 heartbeat each\n")
    res = dex(db, "run", "three-steps", "--input", "1", "--crash-at", "before-commit:4", "--time-skip")
    assert res.returncode == 0 and "never fired: the run reached before-commit 3 times" in res.stderr
    res = dex(db, "run", "three-steps", "--input", "1", "--crash-after", "1h", "--time-skip")
    assert res.returncode == 0 and "dex: warning: --crash-after 3600s never fired: the flow ended first" in res.stderr


def test_a_stall_or_failure_the_run_never_reaches_is_named_at_the_end(cli):
    res = cli.ok("run", "three-steps", "--input", "1", "--stall", "First:2", "--time-skip")
    assert res.stderr == "dex: warning: --stall First:2 never fired: First got no further than attempt 1 here\n"
    res = cli.ok("run", "three-steps", "--input", "1", "--fail", "Second:2", "--time-skip")
    assert res.stderr == ""  # both injected failures happened, then the third attempt succeeded
    res = cli.ok("run", "polling", "--fail", "AwaitJob:5", "--time-skip", code=1)  # 3 attempts at most: FAILED
    assert res.stderr == ("dex: warning: --fail AwaitJob:5 failed 3 of 5 attempts: "
                          "AwaitJob got no further than attempt 3 here\n")
