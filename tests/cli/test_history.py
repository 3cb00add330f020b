"""`dex inspect ID --history`: each event's whole payload, `--step` for one step, paged only on
a terminal and only when it does not fit."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from tests.cli.cli_helpers import Cli, assert_error, subprocess_env

APPROVAL = ("run", "approval", "--flow-id", "a1", "--time-skip", "--input", '{"title": "t", "expire_after_seconds": 1}')


def test_history_prints_every_field_of_every_event_at_80_columns(cli: Cli) -> None:
    cli.ok(*APPROVAL)
    out = cli.ok("inspect", "a1", "--history", env={"COLUMNS": "80"}).stdout
    lines = out.splitlines()
    heads = [ln.split()[3] for ln in lines if not ln.startswith(" " * 8)]
    assert heads == ["FlowStarted", "StepWaitForCompleted", "StepExecuteCompleted", "FlowClosed"]
    assert "        startStepExecutionId: \"AwaitDecision-1\"" in lines
    assert "          expire_after_seconds: 1" in lines  # the start input, one field a line
    assert "              conditionId: \"expire\"" in lines  # the wait's conditions, item by item
    assert "          output: {\"status\": \"expired\", \"title\": \"t\", \"by\": \"\"}" in lines
    assert max(len(ln) for ln in lines) <= 80


def test_step_filters_by_execution_id_or_type_and_json_prints_the_events(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1")
    history = cli.json("inspect", "t1", "--json")["history"]
    assert cli.json("inspect", "t1", "--history", "--json") == history  # the Dex CLI's `flow history` shape
    second = cli.json("inspect", "t1", "--history", "--json", "--step", "Second-1")
    assert second == {**history, "events": [e for e in history["events"]
                                            if e["payload"].get("stepExecutionId") == "Second-1"]}
    assert len(second["events"]) == 1
    assert cli.json("inspect", "t1", "--history", "--json", "--step", "Second") == second
    text = cli.ok("inspect", "t1", "--history", "--step", "First").stdout
    assert "FlowStarted" in text and "First-1" in text and "Second-1  " not in text
    assert_error(cli("inspect", "t1", "--history", "--step", "Fourth"), 2, "no step 'Fourth'", "First, First-1")
    assert_error(cli("inspect", "t1", "--step", "First"), 2, "add --history")
    assert_error(cli("inspect", "t1", "--history", "--timeline"), 2, "choose one")
    assert_error(cli("inspect", "nosuch", "--history"), 3)


def test_no_pager_when_stdout_is_not_a_terminal(cli: Cli, tmp_path: Path) -> None:
    cli.ok(*APPROVAL)
    paged = tmp_path / "paged.txt"
    out = cli.ok("inspect", "a1", "--history", env={"PAGER": f"cat > {paged}", "MANPAGER": ""}).stdout
    assert "conditionResults:" in out and not paged.exists()


def _on_terminal(db: Path, paged: Path, *args: str) -> str:
    """Run `dex inspect` on an 80x24 pseudo-terminal with a pager that writes to `paged`."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = subprocess_env(db)
    env.update(PAGER=f"cat > {paged}", TERM="xterm")
    env.pop("MANPAGER", None)
    env.pop("COLUMNS", None)
    proc = subprocess.Popen([sys.executable, "-m", "dexcli", "inspect", *args], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen, end = b"", time.monotonic() + 30
    while time.monotonic() < end:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=30) == 0, seen
    return seen.decode(errors="replace")


def test_on_a_terminal_a_long_history_goes_through_the_pager_and_a_short_one_does_not(cli: Cli, db: Path,
                                                                                      tmp_path: Path) -> None:
    cli.ok(*APPROVAL)
    paged = tmp_path / "paged.txt"
    shown = _on_terminal(db, paged, "a1", "--history")
    text = paged.read_text()
    assert "conditionResults:" in text and "FlowClosed" in text and "\x1b[" not in text
    assert "conditionResults" not in shown  # all of it went to the pager
    paged.unlink()
    shown = _on_terminal(db, paged, "a1", "--history", "--json")
    assert not paged.exists() and '"conditionResults"' in shown  # JSON is for programs: never paged
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1")
    shown = _on_terminal(db, paged, "t1", "--history", "--step", "Third-1")
    assert not paged.exists() and "StepExecuteCompleted" in shown and "Third-1" in shown  # it fits: printed
