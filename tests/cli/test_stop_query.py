"""`dex stop --query`: every running flow a visibility query matches, counted, confirmed first."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.cli_helpers import Cli, assert_error, subprocess_env


def _statuses(cli: Cli) -> dict[str, str]:
    return {f["flowId"]: f["flowStatus"] for f in cli.json("list", "--json")}


def _three_pollers_and_a_closed_flow(cli: Cli) -> None:
    for fid in ("p1", "p2", "p3"):
        cli.ok("start", "polling", "--flow-id", fid)
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1")


def test_without_a_terminal_it_refuses_unless_yes(cli: Cli) -> None:
    _three_pollers_and_a_closed_flow(cli)
    assert_error(cli("stop", "--query", "FlowType = 'PollingFlow'"), 2, "matches 3 running flow(s)", "--yes")
    assert set(_statuses(cli).values()) == {"RUNNING", "COMPLETED"}  # nothing stopped
    res = cli.ok("stop", "--query", "FlowId IN ('p1', 't1')", "--yes", "--reason", "cleanup")
    assert res.stdout.splitlines() == ["flow p1 stopped (cancel)",
                                       "stopped 1 flow(s) (cancel) (1 closed one(s) left as they are)"]
    assert _statuses(cli) == {"p1": "CANCELED", "p2": "RUNNING", "p3": "RUNNING", "t1": "COMPLETED"}
    out = cli.json("stop", "-q", "FlowStatus = 'RUNNING'", "-y", "--json", "--type", "terminate")
    assert sorted(out["stopped"]) == ["p2", "p3"] and out["skipped"] == [] and out["type"] == "TERMINATE"
    assert cli.ok("stop", "-q", "FlowStatus = 'RUNNING'", "--yes").stdout == "no running flows match\n"


def test_usage_errors(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p1")
    assert_error(cli("stop"), 2, "name the flow to stop, or pass --query")
    assert_error(cli("stop", "p1", "--query", "FlowId = 'p1'"), 2, "not both")
    assert_error(cli("stop", "p1", "--yes"), 2, "go with --query")
    assert_error(cli("stop", "--query", "FlowId = ", "--yes"), 2)
    assert_error(cli("stop", "--query", "JobState = 'x'", "--yes"), 2, "there is no search key 'JobState'")
    assert cli.ok("stop", "--query", "WorkflowId STARTS_WITH 'q'", "--yes").stdout == "no running flows match\n"
    assert_error(cli("stop", "--query", "FlowId = 'p1'", "--type", "pause", "--yes"), 2, "--type must be")
    assert cli.ok("stop", "p1").stdout == "flow p1 stopped (cancel)\n"  # one flow by id, as before


def _answer(db: Path, answer: str) -> tuple[int, str]:
    """`dex stop --query` on a pseudo-terminal, answering its question with `answer`."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dexcli", "stop", "--query", "FlowType = 'PollingFlow'"],
                            stdin=slave, stdout=slave, stderr=slave, env=subprocess_env(db), close_fds=True)
    os.close(slave)
    seen, answered, end = b"", False, time.monotonic() + 30
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        if not answered and b"[y/N]" in seen:
            os.write(master, answer.encode() + b"\n")
            answered = True
        if proc.poll() is not None and not ready:
            break
    os.close(master)
    return proc.wait(timeout=30), seen.decode(errors="replace")


def test_on_a_terminal_it_names_the_flows_and_asks(cli: Cli, db: Path) -> None:
    _three_pollers_and_a_closed_flow(cli)
    code, out = _answer(db, "n")
    assert code == 0 and "3 running flow(s) match: p3, p2, p1" in out and "Cancel 3 flow(s)? [y/N]" in out, out
    assert "nothing stopped" in out and set(_statuses(cli).values()) == {"RUNNING", "COMPLETED"}
    code, out = _answer(db, "y")
    assert code == 0 and "stopped 3 flow(s) (cancel)" in out, out
    assert _statuses(cli) == {"p1": "CANCELED", "p2": "CANCELED", "p3": "CANCELED", "t1": "COMPLETED"}
