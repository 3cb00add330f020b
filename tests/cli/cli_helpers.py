"""Helpers for the CLI tests (not fixtures: those are in conftest.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dexcli.cli.main import app

BASE_ENV = {"NO_COLOR": "1", "COLUMNS": "200", "TERM": "dumb"}


class Cli:
    """`cli("run", "polling", "--time-skip")` -> click Result, with this test's database."""

    def __init__(self, db: Path, cwd: Path) -> None:
        self.db = db
        self.cwd = cwd
        self.runner = CliRunner()

    def __call__(self, *args: str, env: dict[str, str] | None = None, db: bool = True) -> Any:
        full_env: dict[str, str | None] = dict(BASE_ENV)
        full_env["DEX_DB"] = str(self.db) if db else None  # None: unset (an empty DEX_DB is an error)
        full_env.update(env or {})
        return self.runner.invoke(app, list(args), env=full_env)

    def ok(self, *args: str, code: int = 0, **kw: Any) -> Any:
        res = self(*args, **kw)
        assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
        assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
        return res

    def json(self, *args: str, **kw: Any) -> Any:
        return json.loads(self.ok(*args, **kw).stdout)


def assert_error(res: Any, code: int, *fragments: str) -> str:
    """Exact exit code; one line on stderr starting `dex: error:`; no traceback; nothing on stdout
    that looks like one either. Returns the line."""
    assert res.exit_code == code, (res.exit_code, res.stdout, res.stderr)
    assert isinstance(res.exception, SystemExit) or res.exception is None, repr(res.exception)
    err = res.stderr
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    line = lines[0]
    assert line.startswith("dex: error: "), line
    assert "Traceback" not in res.output
    for f in fragments:
        assert f in line, (f, line)
    return line


def start_flow(db: Path, name: str, flow_id: str, input: Any = None, job_duration: float | None = None) -> None:
    """Start a flow the way `dex run` does, but do not drive it (it stays RUNNING, queued)."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.engine.host import StoreHost
    from dexcli.store import Store
    from dexcli_flows.job_service import FakeJobService

    store = Store(db)
    try:
        engine = build_engine(store, time_skip=False)
        flow, ref = load_flow(name)
        if name == "polling":
            FakeJobService(StoreHost(store, engine.clock)).configure_job(flow_id, duration_seconds=job_duration)
        engine.start_flow(flow, flow_id, input, flow_ref=ref)
    finally:
        store.close()


USER_FLOWS = '''
from dataclasses import dataclass

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


@dataclass
class Order:
    item: str
    qty: int


class Double(Step[Order]):
    def execute(self, context: Context, input: Order) -> StepDecision:
        return graceful_complete(input.qty * 2)


class OrderFlow(Flow[Order]):
    """Doubles an order's quantity."""

    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(Double())


order_flow = OrderFlow()


class NeedsArgs(Flow[Order]):
    def __init__(self, x: int) -> None:
        self.x = x

    def get_steps(self) -> StepList[Order]:
        return StepList.start_step(Double())


not_a_flow = 42
'''

INVALID_FLOW = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Work(Step[str]):
    async def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class BrokenFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Work())
'''

IMPORT_ERROR = '''
x = 1
import no_such_module_for_dex_tests  # line 3
'''


def subprocess_env(db: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(BASE_ENV)
    env["DEX_DB"] = str(db)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def drive_until(db: Path, flow_id: str, until: Any) -> None:
    """Drive one flow in this process on the time-skip clock until `until(store)` is true."""
    from dexcli.cli.driver import build_engine
    from dexcli.store import Store

    store = Store(db)
    try:
        build_engine(store, time_skip=True).drive([flow_id], until=lambda: until(store))
    finally:
        store.close()


def parse_iso_seconds(s: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


ANSI_CODES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def dex_in_terminal(db: Path, *args: str, cols: int = 80, rows: int = 24, timeout: float = 60,
                    env: dict[str, str] | None = None, ctrl_c_after: str | None = None) -> tuple[int, list[str]]:
    """Run the real `dex` in a pseudo-terminal of `cols` x `rows` (its stdout and stderr a TTY,
    as in a user's terminal): (exit code, the lines it printed, ANSI codes removed). With
    `ctrl_c_after`: a SIGINT, as Ctrl-C sends, once that text has been printed."""
    import fcntl
    import pty
    import select
    import signal
    import struct
    import subprocess
    import sys
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = subprocess_env(db)
    full_env.pop("COLUMNS", None)
    full_env.update({"TERM": "xterm-256color", "NO_COLOR": "1", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "dexcli", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=full_env, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other end closed: the process is gone
                    break
                if not chunk:
                    break
                out += chunk
                if ctrl_c_after is not None and ctrl_c_after in ANSI_CODES.sub("", out.decode("utf-8", "replace")):
                    proc.send_signal(signal.SIGINT)
                    ctrl_c_after = None
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = ANSI_CODES.sub("", out.decode("utf-8", "replace")).replace("\r\n", "\n")
    return code, text.splitlines()
