"""Naming what is happening: a flow no process drives says so, with the command that helps, and
a retrying step says its attempt, when the next comes, the time left and how to stop it."""

from __future__ import annotations

import io
import os
import socket

import pytest
from rich.console import Console

from dexcli.cli.render import LineDiffer, live_view
from dexcli.cli.render_inspect import inspect_view
from dexcli.engine.views import overdue
from dexcli.plugins import Hint
from dexcli.testing import DexTestEnv
from dexcli_flows.polling import PollingFlow
from tests.engine.engine_flows import Flaky, Single

DEAD = f"{socket.gethostname()}:999999999:x"  # a process of this host that does not run
HINTS = (Hint("complete early:  dex complete-job demo"),)


def render(renderable, width: int = 160) -> str:
    console = Console(width=width, record=True, no_color=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.fixture
def env(tmp_path):
    with DexTestEnv(tmp_path / "dex.db") as e:
        yield e


LIVE = f"{socket.gethostname()}:{os.getpid()}:other"  # another engine of this (live) process


def _held_by(env: DexTestEnv, owner: str) -> None:
    """A polling flow whose running AwaitJob attempt is given to `owner` mid-drive, as if that
    process had leased it: the drive's own release at its end is then fenced, and it stays RUNNING."""
    env.start(PollingFlow(), flow_id="demo")

    def beat_then_hand_over() -> bool:
        if not any(a.heartbeats for a in env.store.attempts_of("demo")):
            return False
        with env.store.tx() as tx:
            tx.c.execute("UPDATE steps SET lease_owner = ? WHERE flow_id = 'demo' AND status = 'RUNNING'", (owner,))
        return True

    env.drive(until=beat_then_hand_over)
    assert env.store.read(lambda tx: tx.get_step("demo", "AwaitJob-1")).lease_owner == owner


def _orphan(env: DexTestEnv) -> None:
    """A polling flow whose AwaitJob attempt belongs to a process that died."""
    _held_by(env, DEAD)


def test_a_flow_no_process_drives_is_named_overdue_with_the_command_that_helps(env):
    _orphan(env)
    before = env.inspect("demo")
    assert before["overdue"] is None  # its heartbeat deadline has not passed yet
    assert "complete-job" in render(live_view(before, "dex.db", hints=HINTS))
    env.clock.advance(132)  # 60 s heartbeat timeout, then 72 s more
    snap = env.inspect("demo")
    assert snap["overdue"]["stepExecutionId"] == "AwaitJob-1" and 70 < snap["overdue"]["seconds"] < 75
    says = "AwaitJob-1 overdue by 1 m 1"
    live = render(live_view(snap, "dex.db", hints=HINTS))
    assert "— no process is driving this flow: `dex resume demo`" in live and says in live
    assert "complete-job" not in live and "times out in" not in live  # only what applies now
    assert "overdue by 1 m 1" in next(ln for ln in live.splitlines() if "heartbeat" in ln)
    text = render(inspect_view(snap))
    assert says in text and "Heartbeat timeout overdue by" in text and "timeout in" not in text
    differ = LineDiffer()
    assert any(says in ln for ln in differ.lines(snap))
    assert not any("overdue" in ln for ln in differ.lines(env.inspect("demo")))  # said once


def test_a_flow_a_live_process_holds_is_not_overdue(env):
    _held_by(env, LIVE)
    env.clock.advance(300)  # a live process holds the attempt: it will time it out itself
    assert env.inspect("demo")["overdue"] is None


def test_a_queued_step_nobody_claims_is_overdue_and_a_closed_flow_never_is(env):
    env.start(PollingFlow(), flow_id="q")
    assert overdue(env.inspect("q")["steps"]) is None
    env.clock.advance(30)
    assert env.inspect("q")["overdue"]["stepExecutionId"] == "StartJob-1"
    env.drive()
    assert env.inspect("q")["overdue"] is None


def test_a_retrying_step_shows_its_attempt_the_next_the_time_left_and_how_to_stop(env):
    env.start(Single(Flaky(None, fail_always=True)), 0, "r")
    env.drive(until=lambda: len(env.store.attempts_of("r")) >= 3
              and env.store.steps_of("r")[0].status.value == "BACKOFF")
    snap = env.inspect("r")
    (step,) = snap["steps"]
    assert step["status"] == "BACKOFF" and step["maxAttempts"] == 0  # unlimited by default
    live = render(live_view(snap, "dex.db"))
    line = next(ln for ln in live.splitlines() if "Flaky-1" in ln and "next in" in ln)
    assert "attempt 4/∞ · next in " in line and " · total left 3 h 59 m" in line
    assert "· Ctrl-C or `dex stop r` (backoff after builtins.RuntimeError)" in line
