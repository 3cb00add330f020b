"""Names a user types are checked against what exists (an attribute, a search key) and refused
with the known ones (exit 2), instead of a wait that times out or "no flows match"; and the
messages of mistakes say what to do (issue 24, items 8 and 13)."""

from __future__ import annotations

import pytest

from tests.cli.cli_helpers import Cli, assert_error

PAYMENT = '{"payment_id": "p-1", "amount": 250}'


@pytest.fixture
def paid(cli: Cli) -> str:
    cli.ok("run", "payment", "--flow-id", "pay", "--input", PAYMENT, "--time-skip")
    return "pay"


def test_wait_for_an_attribute_the_flow_does_not_declare_exits_2_naming_its_attributes(cli: Cli, paid: str) -> None:
    line = assert_error(cli("wait", paid, "--attribute", "nosuch", "--equals", "1", "--timeout", "30s"), 2,
                        "flow pay (PaymentFlow) has no attribute 'nosuch'", "its attributes: payment_state, "
                        "settled_total")
    assert "timed out" not in line
    assert_error(cli("wait", paid, "--attribute", "settled_total", "--instance", "a", "--equals", "1"), 2,
                 "settled_total is an Attribute of flow pay (PaymentFlow), not an AttributeMap")
    assert cli.ok("wait", paid, "--attribute", "settled_total", "--equals", "250").stdout == "250\n"


def test_wait_on_a_flow_without_attributes_says_it_declares_none(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    assert_error(cli("wait", "t", "--attribute", "x", "--equals", "1"), 2, "it declares no attributes")


def test_a_query_on_a_search_key_nothing_has_exits_2_naming_the_keys(cli: Cli, paid: str) -> None:
    assert_error(cli("list", "--query", "Foo = 1"), 2, "there is no search key 'Foo'",
                 "FlowId, RunId, FlowType, FlowStatus, StartTime, CloseTime, WorkflowId, ExecutionStatus, "
                 "ActiveStepTypes, PaymentState")
    assert_error(cli("list", "--query", "FlowStatus = 'RUNNING' ORDER BY Bar"), 2, "no search key 'Bar'")
    assert "pay" in cli.ok("list", "--query", "PaymentState = 'settled'").stdout


def test_a_declared_search_key_no_flow_has_yet_is_a_search_with_no_match(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")  # no payment ran: no PaymentState row
    assert cli.ok("list", "--query", "PaymentState = 'settled'").stdout == "no flows match\n"


def test_a_page_token_without_its_query_says_to_pass_the_query(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    line = assert_error(cli("list", "--page-token", "WyJGbG93SWQiLGZhbHNlLCJ0MSIsInQxIl0"), 2,
                        "--page-token continues a `dex list --query` listing: pass the --query that printed it")
    assert "ORDER BY" not in line


@pytest.mark.parametrize("verb, example", [("skip", "dex time skip 2m FLOW_ID"), ("reset", "dex time reset FLOW_ID")])
def test_time_without_flows_asks_which_not_both(cli: Cli, verb: str, example: str) -> None:
    args = ["time", verb, "2m"] if verb == "skip" else ["time", verb]
    line = assert_error(cli(*args), 2, f"name them ({example}) or pass --all")
    assert "not both" not in line
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    assert_error(cli(*args, "t", "--all"), 2, "or pass --all, not both")


def test_input_that_lost_its_quotes_in_the_shell_gets_the_quoted_form(cli: Cli, tmp_path) -> None:
    assert_error(cli("run", "three-steps", "--input", "dana"), 2, "--input is not valid JSON",
                 "a string is quoted in JSON: --input '\"dana\"'")
    line = assert_error(cli("run", "three-steps", "--input", "{nope"), 2, "--input is not valid JSON")
    assert "quoted" not in line
    (tmp_path / "in.txt").write_text("dana")
    assert "quoted" not in assert_error(cli("run", "three-steps", "--input", f"@{tmp_path / 'in.txt'}"), 2)


def test_dex_logs_points_to_inspect_and_watch(cli: Cli) -> None:
    line = assert_error(cli("logs", "x1", db=False), 2, "No such command 'logs'", "dex inspect ID --timeline",
                        "dex watch ID")
    assert "Did you mean" not in line  # not click's nearest spelling, 'flows'
    assert "Did you mean 'flows'" in assert_error(cli("flowz", db=False), 2)
