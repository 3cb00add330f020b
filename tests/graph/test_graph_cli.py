from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from dexcli.cli.errors import NotFoundError, UsageError
from dexcli.cli.graph_cmds import register
from tests.graph.graph_helpers import file_ref


@pytest.fixture(scope="module")
def app():
    app = typer.Typer()
    register(app)
    return app


def run(app, *args, env=None):
    return CliRunner().invoke(app, list(args), env=env)


def test_graph_polling_shows_the_documentation_picture(app):
    res = run(app, "graph", "polling", env={"NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    assert "\x1b[" not in res.output
    lines = res.output.splitlines()
    assert lines[0] == "PollingFlow   ✓ Valid"
    assert lines[1] == "START ──▶ StartJob ──goTo──▶ AwaitJob ──gracefulComplete──▶ ◉"
    assert lines[3].endswith("└──if execute fails──▶ RecordJobWaitFailure ──forceFail──▶ ◉")


def test_graph_text_is_not_wrapped_on_narrow_terminals(app):
    res = run(app, "graph", "polling", env={"COLUMNS": "30"})
    assert res.output.splitlines()[1] == "START ──▶ StartJob ──goTo──▶ AwaitJob ──gracefulComplete──▶ ◉"


@pytest.mark.parametrize("fmt, probe", [("mermaid", "flowchart LR"), ("dot", 'digraph "PollingFlow" {'),
                                        ("json", '"verdict": "Valid"')])
def test_graph_formats(app, fmt, probe):
    res = run(app, "graph", "polling", "--format", fmt)
    assert res.exit_code == 0 and probe in res.output
    if fmt == "json":
        assert len(json.loads(res.output)["edges"]) == 6


def test_graph_of_an_invalid_flow_shows_why(app):
    res = run(app, "graph", "--file", file_ref("wrong_context"))
    assert res.exit_code == 1  # like lint: an Invalid flow fails the command
    assert "✗ Invalid" in res.output and "execute context must be AsyncContext" in res.output


def test_graph_errors_are_dex_errors_for_the_main_cli(app):
    res = run(app, "graph", "no-such-flow")
    assert isinstance(res.exception, NotFoundError)
    res = run(app, "graph")
    assert isinstance(res.exception, UsageError)
    res = run(app, "graph", "polling", "--file", file_ref("unreachable"))
    assert isinstance(res.exception, UsageError)
    res = run(app, "graph", "polling", "--format", "svg")
    assert res.exit_code == 2


def test_lint_example_flows_clean(app):
    res = run(app, "lint")
    assert res.exit_code == 0
    assert "PollingFlow   ✓ Valid   ✓ no findings" in res.output
    assert run(app, "lint", "polling", "--exit-zero").exit_code == 0


def test_lint_warning_exit_codes(app):
    res = run(app, "lint", "--file", file_ref("heartbeat_window"))
    assert res.exit_code == 1  # a warning is a finding: it fails, as in ruff and flake8
    assert "heartbeat_window.py:22: warning [heartbeat-window]" in res.output
    assert "1 warning" in res.output
    res = run(app, "lint", "--file", file_ref("heartbeat_window"), "--exit-zero")
    assert res.exit_code == 0 and "1 warning" in res.output


def test_lint_error_exit_code_and_json(app):
    res = run(app, "lint", "--file", file_ref("unknown_target"), "--json")
    assert res.exit_code == 1
    data = json.loads(res.output)
    assert data["errors"] == 1 and data["exitCode"] == 1
    (finding,) = data["flows"][0]["findings"]
    assert finding["rule"] == "unknown-target" and finding["line"] == 12
    assert finding["file"].endswith("bad_flows/unknown_target.py")


def test_lint_reports_silenced_count(app):
    res = run(app, "lint", "--file", file_ref("silenced"))
    assert res.exit_code == 0 and "1 silenced by # dex: ignore" in res.output  # silenced: no finding
