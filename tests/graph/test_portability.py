"""`dex lint --portable`: what would not carry over to a Dex server, each with file:line and the
fix. The marked lines of tests/graph/portable_flows/not_portable.py are exactly the findings;
a portable flow (the three-steps example) has none; without --portable none are reported."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dexcli.cli.graph_cmds import register
from dexcli.cli.loader import load_flow
from dexcli.graph.lint import lint_flow
from dexcli_flows.three_steps import ThreeStepFlow

FIXTURE = Path(__file__).resolve().parent / "portable_flows" / "not_portable.py"
REF = f"{FIXTURE}:NotPortableFlow"
MARK = re.compile(r"#\s*PORTABLE\s+([a-z-]+)$")


def marked() -> set[tuple[str, int]]:
    return {(f"portability/{m.group(1)}", i) for i, line in enumerate(FIXTURE.read_text().splitlines(), 1)
            if (m := MARK.search(line))}


def portability(flow: object, portable: bool = True) -> set[tuple[str, int | None]]:
    report = lint_flow(flow, portable=portable)
    return {(f.rule, f.line) for f in report.findings if f.rule.startswith("portability/")}


def test_every_marked_line_is_a_finding_and_nothing_else() -> None:
    flow, _ = load_flow(file=REF)
    assert portability(flow) == marked()


def test_findings_name_the_fix_and_are_warnings() -> None:
    flow, _ = load_flow(file=REF)
    findings = [f for f in lint_flow(flow, portable=True).findings if f.rule.startswith("portability/")]
    assert {f.severity for f in findings} == {"warning"}
    assert all("Fix: " in f.message for f in findings)
    by_line = {f.line: f.message for f in findings}
    assert "Worker(db=...) is dexcli's only" in by_line[37]
    assert "start_flow(flow, None, ...)" in by_line[40]
    assert "Registry(..., allow_async_handlers=True)" in by_line[21]


def test_without_portable_and_for_a_portable_flow_there_are_none() -> None:
    flow, _ = load_flow(file=REF)
    assert portability(flow, portable=False) == set()
    assert portability(ThreeStepFlow()) == set()


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def test_the_cli_flag(app: typer.Typer) -> None:
    res = CliRunner().invoke(app, ["lint", "--portable", "--file", REF, "--json"])
    assert res.exit_code == 1, res.output  # warnings are findings
    rules = {f["rule"] for f in json.loads(res.output)["flows"][0]["findings"]}
    assert {r for r in rules if r.startswith("portability/")} == {r for r, _ in marked()}
    res = CliRunner().invoke(app, ["lint", "--portable", "--file", REF], env={"NO_COLOR": "1"})
    assert res.exit_code == 1
    assert "not_portable.py:8: warning [portability/dex-only-module]" in res.output
    assert "--portable" in CliRunner().invoke(app, ["lint", "--help"], env={"NO_COLOR": "1"}).output
