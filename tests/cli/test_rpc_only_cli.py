"""A flow without a start step through the real `dex` command: it starts RUNNING with no step and
says so (live view, plain lines, inspect, list); RPCs answer and start its steps; a stop or its
timeout ends it. And a start SDK 1.23 would refuse is one line."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import assert_error, dex_in_terminal, subprocess_env

BOARD = '''
from dexcli import (Attribute, Context, Flow, PersistenceSchema, RPCResult, Step, StepDecision, StepList,
                    StepMovement, dead_end, rpc)


class Push(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        print(f"pushed {input}")
        return dead_end()


class Board(Flow[None]):
    title = Attribute("Title", str)

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(Push())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(self.title)

    @rpc
    def get(self, context: Context) -> RPCResult[str]:
        return RPCResult(self.title.get(context))

    @rpc
    def update(self, context: Context, title: str) -> RPCResult[None]:
        self.title.set(context, title)
        return RPCResult(None, next_steps=(StepMovement.of(Push, title),))
'''

UNROUTED = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, graceful_complete


class Recover(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class Work(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class UnroutedFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Work())
'''

IDLE = "no start step: the flow answers RPCs"


@pytest.fixture
def board(tmp_path: Path) -> str:
    path = tmp_path / "board.py"
    path.write_text(textwrap.dedent(BOARD))
    return f"{path}:Board"


def test_started_it_is_running_with_no_step_and_rpcs_start_its_steps(cli, board):
    assert cli.ok("start", "--file", board, "--flow-id", "j").stdout.strip() == "j"
    listed = cli.ok("list").stdout
    assert any(line.split()[:3] == ["j", "Board", "RUNNING"] for line in listed.splitlines()), listed
    shown = cli.ok("inspect", "j").stdout
    assert f"Waiting on:  {IDLE} (dex rpc j NAME) until one starts a step, it times out or is stopped" in shown
    assert "FlowStarted           no start step: idle until an RPC starts one" in shown
    cli.ok("rpc", "j", "update", "--file", board, "--input", '"Engineer"')
    assert cli.ok("rpc", "j", "get", "--file", board).stdout.strip() == '"Engineer"'
    assert "Push-1  QUEUED" in cli.ok("inspect", "j").stdout  # an RPC started it; a dex resume runs it
    assert IDLE not in cli.ok("inspect", "j").stdout


def test_a_worker_until_idle_says_what_it_is_left_waiting_for(cli, board):
    cli.ok("start", "--file", board, "--flow-id", "j")
    out = cli.ok("worker", "--until-idle").stdout
    assert f"  j: {IDLE} (dex rpc j NAME) until one starts a step, it times out or is stopped" in out, out
    cli.ok("rpc", "j", "update", "--file", board, "--input", '"Engineer"')
    out = cli.ok("worker", "--until-idle").stdout  # runs Push, which dead-ends
    assert "  j: idle (dead end) until it is stopped or an RPC starts a step" in out, out
    assert "Push-1  COMPLETED" in cli.ok("inspect", "j").stdout


def test_dex_run_prints_that_it_is_idle_and_ends_when_stopped(cli, board, db):
    proc = subprocess.Popen([sys.executable, "-m", "dexcli", "run", "--file", board, "--flow-id", "j"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(db))
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[0].startswith(" dex · Board · j"), lines
        assert lines[1].strip() == (f"… {IDLE} (dex rpc j get | dex rpc j update) until one starts a step, "
                                    "it times out or is stopped"), lines
        cli.ok("stop", "j")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (out, err)
    assert "CANCELED" in out


def test_the_live_view_says_it_is_idle(board, db):
    code, lines = dex_in_terminal(db, "run", "--file", board, "--flow-id", "j", cols=200, ctrl_c_after=IDLE)
    assert code == 130, lines
    assert any(IDLE in line and "dex rpc j get | dex rpc j update" in line for line in lines), lines


def test_its_flow_timeout_ends_a_dex_run(cli, board):
    res = cli("run", "--file", board, "--flow-id", "j", "--time-skip", "--timeout", "1h")
    assert res.exit_code == 1, (res.stdout, res.stderr)
    assert "FLOW_TIMEOUT: Flow timed out after 3600 seconds" in res.stdout


def test_a_start_input_is_one_line(cli, board):
    assert_error(cli("run", "--file", board, "--input", '"x"'), 2,
                 "Board takes no --input (it has no start step: RPCs start its steps)")


def test_a_start_step_whose_failure_route_no_worker_can_follow_is_refused_in_one_line(cli, tmp_path):
    path = tmp_path / "unrouted.py"
    path.write_text(textwrap.dedent(UNROUTED))
    assert_error(cli("run", "--file", f"{path}:UnroutedFlow", "--input", "1"), 2,
                 "flow UnroutedFlow, step Work: on_execute_failure_proceed_to(Recover) names a step that is not "
                 "registered: the start is refused")
    assert not cli.db.exists() or "UnroutedFlow" not in cli("list").stdout
