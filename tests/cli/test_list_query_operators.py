"""`dex list --query` takes the server's keys and operators (issue 23, rule 8), refuses a key
nothing has in one line, and stays a store read: the JSON path imports no engine module and
neither path imports pydantic or loads a flow's code when every key it names is held."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, assert_error, subprocess_env
from tests.cli.test_names_and_hints import PAYMENT


@pytest.fixture
def flows(cli: Cli) -> Cli:
    cli.ok("run", "payment", "--flow-id", "pay-1", "--input", PAYMENT, "--time-skip")
    cli.ok("run", "three-steps", "--flow-id", "t-1", "--input", "1")
    return cli


@pytest.mark.parametrize(("query", "expected"), [
    ("WorkflowId STARTS_WITH 'pay'", ["pay-1"]),
    ("ExecutionStatus = 'Completed' AND WorkflowId NOT IN ('pay-1')", ["t-1"]),
    ("PaymentState IS NULL", ["t-1"]),
    ("PaymentState IS NOT NULL AND StartTime BETWEEN 0 AND '2999-01-01T00:00:00Z'", ["pay-1"]),
])
def test_the_servers_keys_and_operators(flows: Cli, query: str, expected: list[str]) -> None:
    assert [f["flowId"] for f in flows.json("list", "--query", query, "--json")["flows"]] == expected


def test_an_operator_used_wrongly_is_one_line_naming_the_column(flows: Cli) -> None:
    assert_error(flows("list", "--query", "PaymentState BETWEEN 'a' OR 'b'"), 2,
                 "query: expected AND between the two values of BETWEEN at column 26: found 'OR'")


SPY = ("import json, sys\nfrom dexcli.cli.main import main\n"
       "sys.argv = ['dex', 'list', '--query', sys.argv[1], *sys.argv[2:]]\n"
       "try:\n    main()\nexcept SystemExit:\n    pass\n"
       "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('dexcli', 'pydantic', 'dexcli_flows'))),"
       " file=sys.stderr)\n")


@pytest.mark.parametrize("json_out", [True, False])
def test_the_query_path_loads_no_engine_and_no_pydantic(flows: Cli, tmp_path: Path, json_out: bool) -> None:
    res = subprocess.run([sys.executable, "-c", SPY, "WorkflowId STARTS_WITH 'pay' AND PaymentState IS NOT NULL",
                          *(["--json"] if json_out else [])], env=subprocess_env(flows.db), capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert "pay-1" in res.stdout, res.stderr
    loaded = json.loads(res.stderr.splitlines()[-1])
    assert [m for m in loaded if m.split(".")[0] in ("pydantic", "dexcli_flows")] == []
    engine = [m for m in loaded if m.startswith("dexcli.engine.")]
    # the table's duration column reads one helper of the engine's read-only views; nothing that runs flows
    views = ["dexcli.engine.attribute_projections", "dexcli.engine.deadlines", "dexcli.engine.retry_policy",
             "dexcli.engine.views", "dexcli.engine.wait_kinds"]
    assert engine == ([] if json_out else views)
