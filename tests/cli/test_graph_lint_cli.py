"""`dex graph` and `dex lint` through the `dex` command: what a user of the shipped examples sees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BAD = Path(__file__).resolve().parents[1] / "graph" / "bad_flows"


@pytest.mark.parametrize("fmt", ["text", "mermaid", "dot", "json"])
def test_graph_payment_draws_no_edge_from_a_helper_functions_return(cli, fmt):
    out = cli.ok("graph", "payment", "--format", fmt).stdout
    assert "SETTLED" not in out and "provider_state" not in out
    assert "?" not in out and "unknown" not in out
    if fmt == "json":
        assert [e["to"] for e in json.loads(out)["edges"]] == ["AwaitPayment", "RecordSettlement", "end"]


def test_lint_fails_on_warnings_unless_exit_zero(cli):
    ref = f"{BAD / 'heartbeat_window.py'}:HeartbeatWindowFlow"
    res = cli.ok("lint", "--file", ref, code=1)
    assert "warning [heartbeat-window]" in res.stdout and "1 warning" in res.stdout
    res = cli.ok("lint", "--file", ref, "--exit-zero")
    assert "1 warning" in res.stdout
    assert json.loads(cli.ok("lint", "--file", ref, "--json", code=1).stdout)["exitCode"] == 1
    assert "--exit-zero" in cli.ok("lint", "--help").stdout


def test_lint_of_the_examples_has_no_findings_and_exits_0(cli):
    assert "✓ no findings" in cli.ok("lint").stdout
