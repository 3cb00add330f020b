"""`dex lint --flow-id ID`: the timer-self-loop anti-pattern in what a run did (its step
executions and persisted Waits), with file:line from the definition stored with the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dexcli.cli.errors import NotFoundError, UsageError
from dexcli.cli.graph_cmds import register
from dexcli.store.errors import DatabaseMissingError
from dexcli.testing import DexTestEnv
from tests.graph.graph_helpers import file_ref, load_bad


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database with run `t` of bad_flows/timer_poll.py: PollTwice moved to itself 4 times after
    waiting on Timers only; RemindOrReply twice after a channel-or-timer wait; PollViaHelper once."""
    path = tmp_path_factory.mktemp("lint-run") / "dex.db"
    with DexTestEnv(path, start=0.0) as env:
        env.engine.start_flow(load_bad("timer_poll"), "t", 4, flow_ref=f"file:{file_ref('timer_poll')}")
        assert env.client.wait_for_flow("t").single_output() == "done"
        env.client.start_flow(load_bad("timer_poll"), "quiet", 0)  # no definition stored with it
        env.client.wait_for_flow("quiet")
    return str(path)


def run(app: typer.Typer, db: str, *args: str) -> object:
    return CliRunner().invoke(app, list(args), env={"DEX_DB": db, "NO_COLOR": "1"})


def test_the_run_finding_names_the_step_the_count_and_the_line_that_goes_to_itself(app, db) -> None:
    res = run(app, db, "lint", "--flow-id", "t")
    assert res.exit_code == 1, res.output  # a finding fails the lint (--exit-zero: 0)
    first, summary = res.output.splitlines()
    # a flow started from a file: a read command imports none of its code, so no file:line
    # (an installed flow gets one), and the finding names the run
    assert first.startswith("flow t: warning [timer-self-loop] "), first
    assert ("PollTwice waited only on a Timer and then moved to a new execution of itself 4 times in a row "
            "(PollTwice-1 … PollTwice-5, each after 30 s).") in first
    assert summary == "flow t (TimerPollFlow)   1 warning"
    assert run(app, db, "lint", "--flow-id", "t", "--exit-zero").exit_code == 0


def test_the_run_finding_as_json(app, db) -> None:
    res = run(app, db, "lint", "--flow-id", "t", "--json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert (data["flowId"], data["flow"], data["warnings"], data["exitCode"]) == ("t", "TimerPollFlow", 1, 1)
    [finding] = data["findings"]
    assert (finding["rule"], finding["step"], finding["run"], finding["severity"]) == \
        ("timer-self-loop", "PollTwice", "t", "warning")


def test_a_run_without_polling_has_no_findings(app, db) -> None:
    res = run(app, db, "lint", "--flow-id", "quiet")
    assert res.exit_code == 0 and res.output == "flow quiet (TimerPollFlow)   ✓ no findings\n"


def test_lint_run_errors(app, db, tmp_path: Path) -> None:
    res = run(app, db, "lint", "--flow-id", "nope")
    assert isinstance(res.exception, NotFoundError) and "no flow with id 'nope'" in str(res.exception)
    res = run(app, str(tmp_path / "missing.db"), "lint", "--flow-id", "t")
    assert isinstance(res.exception, DatabaseMissingError) and res.exception.exit_code == 3  # not found
    for extra in (["polling"], ["--file", file_ref("timer_poll")], ["--portable"]):
        res = run(app, db, "lint", "--flow-id", "t", *extra)
        assert isinstance(res.exception, UsageError) and "--flow-id checks what a run did" in str(res.exception)


def test_graph_json_of_the_approval_example_from_the_command(app, db) -> None:
    res = run(app, db, "graph", "approval", "--format", "json")
    assert res.exit_code == 0
    [step] = [n for n in json.loads(res.output)["nodes"] if n["kind"] == "step"]
    assert step["waitFor"]["waits"][0]["kind"] == "any_of"
    res = run(app, db, "graph", "approval")
    assert "wait conditions:\n  AwaitDecision  waits any_of(decisions.for_one [decision]" in res.output
