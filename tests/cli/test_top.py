"""`dex top`: every flow of the database at a glance — counts, what the running flows do, the
overdue and orphaned ones named — at 80×24, live on a terminal until q or Ctrl-C; read-only."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, drive_until, subprocess_env

APPROVAL_INPUT = '{"title": "expense report"}'


def _dump(db: Path) -> list[str]:
    c = sqlite3.connect(db)
    try:
        return list(c.iterdump())
    finally:
        c.close()


@pytest.fixture
def busy_db(cli: Cli, db: Path) -> Path:
    """One flow of each kind `dex top` tells apart: completed, waiting, orphaned, overdue."""
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1")
    cli.ok("start", "approval", "--flow-id", "a1", "--input", APPROVAL_INPUT)
    drive_until(db, "a1", lambda store: store.steps_of("a1")[0].status.value == "WAITING")
    crash = subprocess.run([sys.executable, "-m", "dexcli", "run", "polling", "--flow-id", "p-crash",
                            "--crash-at", "heartbeat:1"], env=subprocess_env(db), capture_output=True, text=True,
                           timeout=60)
    assert crash.returncode == 137, crash.stderr  # died holding AwaitJob-1's attempt
    cli.ok("start", "polling", "--flow-id", "p-queued")
    cli.ok("time", "skip", "1m", "p-queued")  # its first step is a minute past due, and nothing drives it
    return db


def test_once_fits_80_by_24_and_names_what_each_running_flow_does(cli: Cli, busy_db: Path) -> None:
    before = _dump(busy_db)
    lines = cli.ok("top", "--once", env={"COLUMNS": "80"}).stdout.splitlines()
    assert len(lines) <= 24 and max(len(ln) for ln in lines) <= 80, lines
    assert lines[0].startswith("dex top · ") and lines[0].endswith("/dex.db") and len(lines[0]) == 80
    assert lines[1] == "4 flow(s): 3 running · 1 completed · 0 failed · 0 canceled · 0 terminated"
    text = "\n".join(lines)
    assert "t1" not in text  # closed flows are counted, not listed
    heads = [ln.split()[0] for ln in lines[3:] if not ln.startswith(" ")]
    assert heads == ["p-queued", "p-crash", "a1"]  # those in trouble first, then the newest
    assert "  · StartJob-1  queued" in lines
    assert any(ln.startswith("    ! overdue 1 m") and ln.endswith(", nothing drives it: dex resume p-queued")
               for ln in lines)
    crash = next(ln for ln in lines if "AwaitJob-1" in ln)
    assert "attempt 1/3" in crash and "heartbeat" in crash and "ago" in crash
    assert any(ln.startswith("    ! orphaned: its process is gone; lost in ") for ln in lines)
    assert any(ln.startswith("  ○ AwaitDecision-1  waiting (any of) for ") for ln in lines)
    assert any(ln.startswith("      timer expire fires in 23 h 59 m") for ln in lines)
    assert "      channel decisions: 0 queued, needs 1 (decision)" in lines
    assert _dump(busy_db) == before  # read-only


def test_json_has_the_counts_and_each_running_flows_open_steps(cli: Cli, busy_db: Path) -> None:
    before = _dump(busy_db)
    ov = cli.json("top", "--json")
    assert ov["counts"] == {"RUNNING": 3, "COMPLETED": 1, "FAILED": 0, "CANCELED": 0, "TERMINATED": 0,
                          "CONTINUED_AS_NEW": 0}
    assert ov["total"] == 4 and ov["runningNotShown"] == 0
    by_id = {f["summary"]["flowId"]: f for f in ov["running"]}
    assert [f["summary"]["flowId"] for f in ov["running"]] == ["p-queued", "p-crash", "a1"]
    assert by_id["p-queued"]["overdue"]["stepExecutionId"] == "StartJob-1" and by_id["p-queued"]["orphaned"] == []
    assert by_id["p-crash"]["orphaned"] == ["AwaitJob-1"] and by_id["p-crash"]["overdue"] is None
    assert [s["status"] for s in by_id["a1"]["steps"]] == ["WAITING"]
    assert by_id["p-queued"]["steps"][0]["attempts"] == []  # nothing ran it
    assert cli.json("top", "--json", "--limit", "1")["runningNotShown"] == 2
    assert _dump(busy_db) == before


def test_a_pipe_gets_every_flow_read_and_a_24_line_screen_says_how_many_more_run(cli: Cli) -> None:
    from dexcli.cli.render_top import screen

    for i in range(12):
        # delayed an hour: none is overdue however slowly the twelve starts go (each shows in 2 lines)
        cli.ok("start", "three-steps", "--input", "1", "--flow-id", f"t{i:02}", "--start-delay", "1h")
    lines = cli.ok("top", "--once", env={"COLUMNS": "80"}).stdout.splitlines()
    assert lines[1].startswith("12 flow(s): 12 running")
    assert len(lines) == 3 + 12 * 2  # not a terminal: every flow read is shown
    shown = [t.plain for t in screen(cli.json("top", "--json"), "dex.db", 80, 24)]  # what a terminal gets
    assert len(shown) == 24 and shown[1] == lines[1] and max(len(ln) for ln in shown) <= 80
    assert shown[-1] == "… 2 more running: dex list --status RUNNING"  # 10 flows of 2 lines, then this
    assert [ln.split()[0] for ln in shown[3:-1] if not ln.startswith(" ")] == [f"t{i:02}" for i in range(11, 1, -1)]


def _pty_top(db: Path, key: bytes, drawn: tuple[bytes, ...]) -> tuple[int, str]:
    """`dex top` live on an 80x24 pseudo-terminal; `key` once every one of `drawn` has been read from it.

    Not sooner: Ctrl-C makes the terminal driver flush what it holds, so a screen read only in part
    would lose its rest."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = subprocess_env(db)
    env["TERM"] = "xterm"
    env.pop("COLUMNS", None)
    def controlling_terminal() -> None:  # so Ctrl-C on it is a SIGINT, as in a shell
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-m", "dexcli", "top", "--interval", "0.2"], stdin=slave, stdout=slave,
                            stderr=slave, env=env, close_fds=True, preexec_fn=controlling_terminal)
    os.close(slave)
    seen, sent, end = b"", False, time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
        if not sent and all(d in seen for d in drawn):
            os.write(master, key)
            sent = True
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait(timeout=10)
    finally:
        os.close(master)
    return code, seen.decode(errors="replace")


@pytest.mark.parametrize("key", [b"q", b"\x03"], ids=["q", "ctrl-c"])
def test_live_on_a_terminal_until_q_or_ctrl_c(cli: Cli, db: Path, key: bytes) -> None:
    cli.ok("start", "polling", "--flow-id", "p1")
    before = _dump(db)
    code, screen = _pty_top(db, key, (b"q quits", b"p1", b"StartJob-1"))
    assert code == 0, screen
    assert "q quits" in screen and "p1" in screen and "StartJob-1" in screen
    assert "Traceback" not in screen and "interrupted" not in screen
    assert _dump(db) == before
