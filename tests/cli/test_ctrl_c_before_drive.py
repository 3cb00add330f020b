"""Ctrl-C between `dex run`'s start and its drive, in a real process: the start leased the first
attempt, but no attempt began. Nothing may be reported INTERRUPTED: the lease is given back (the
step is QUEUED, with no attempt), and the message says how to continue. An attempt that began
is still reported INTERRUPTED, as before.

The SIGINT is real (the process sends it to itself, so the KeyboardInterrupt lands exactly at
the point named); only where it is sent from is arranged, by wrapping one function."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import subprocess_env
from tests.cli.test_subprocess import dex

pytestmark = pytest.mark.timeout(60)

FLOW_ID = "cc"

# argv: POINT then dex's own arguments. SIGINT goes out right before (or, for `started` and
# `begun`, right after) the named function runs; Python raises KeyboardInterrupt at once.
SCRIPT = """
import os, signal, sys
from dexcli.cli import driver
from dexcli.engine.core import Engine

def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)

def before(cls, name):
    original = getattr(cls, name)
    def wrapped(*args, **kwargs):
        ctrl_c()
        return original(*args, **kwargs)
    setattr(cls, name, wrapped)

def after(cls, name):
    original = getattr(cls, name)
    def wrapped(*args, **kwargs):
        result = original(*args, **kwargs)
        ctrl_c()
        return result
    setattr(cls, name, wrapped)

point = sys.argv.pop(1)
{"view": lambda: before(driver.View, "start"),          # the drive's setup, after the start
 "drive": lambda: before(Engine, "_run"),              # its loop runs; the held attempt not started
 "started": lambda: after(Engine, "_start_attempt"),     # started, but its first step not run yet
 "begun": lambda: after(Engine, "_attempt_started"),     # it began (attemptStarted): truly interrupted
 }[point]()
from dexcli.cli.main import main
main()
"""


def run_interrupted(db: Path, point: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, point, "run", "three-steps", "--flow-id", FLOW_ID,
                           "--input", "3", *args], env=subprocess_env(db), capture_output=True, text=True,
                          timeout=30)


def first_step(db: Path) -> dict[str, Any]:
    snap = json.loads(dex(db, "inspect", FLOW_ID, "--json").stdout)
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING"
    return next(s for s in snap["steps"] if s["stepExecutionId"] == "First-1")


@pytest.mark.parametrize("point", ["view", "drive", "started"])
@pytest.mark.parametrize("json_out", [False, True], ids=["plain", "json"])
def test_ctrl_c_before_the_first_attempt_began_gives_its_lease_back(tmp_path: Path, point: str,
                                                                    json_out: bool) -> None:
    db = tmp_path / "dex.db"
    res = run_interrupted(db, point, *(["--json"] if json_out else []))
    assert res.returncode == 130, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert "INTERRUPTED" not in res.stderr  # no attempt ran, so none was interrupted
    assert "still RUNNING" in res.stderr and f"Resume it with: dex resume {FLOW_ID}" in res.stderr
    assert "First-1 is queued" in res.stderr
    if json_out:
        assert json.loads(res.stdout.splitlines()[0])["type"] == "flowStarted"
        assert "attemptStarted" not in res.stdout
    step = first_step(db)
    assert step["status"] == "QUEUED" and step["attempts"] == []  # given back: nothing recorded
    done = dex(db, "resume", FLOW_ID)
    assert done.returncode == 0, done.stderr
    snap = json.loads(dex(db, "inspect", FLOW_ID, "--json").stdout)
    assert snap["summary"]["completions"][0]["output"] == 11
    first = next(s for s in snap["steps"] if s["stepExecutionId"] == "First-1")
    assert [(a["attempt"], a["outcome"]) for a in first["attempts"]] == [(1, "COMPLETED")]


def test_ctrl_c_once_the_attempt_began_still_reports_it_interrupted(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    res = run_interrupted(db, "begun")
    assert res.returncode == 130, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert "the attempt that was running ended INTERRUPTED" in res.stderr
    step = first_step(db)
    assert step["status"] == "QUEUED"
    assert [(a["attempt"], a["outcome"]) for a in step["attempts"]] == [(1, "INTERRUPTED")]
