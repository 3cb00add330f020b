"""`dex run --attribute NAME=JSON`: initial attribute values; a name the flow lacks or a value
that is not JSON is one line and exit 2."""

from __future__ import annotations

from pathlib import Path

from tests.cli.cli_helpers import assert_error

PAYMENT = str(Path(__file__).resolve().parents[2] / "flows" / "payment.py") + ":PaymentFlow"
INPUT = '{"payment_id": "p-1", "amount": 250, "polls_to_settle": 2, "poll_seconds": 1}'


def test_an_initial_value_is_added_to(cli):
    cli.ok("run", "--file", PAYMENT, "--input", INPUT, "--flow-id", "p", "--attribute", "settled_total=100",
           "--time-skip")
    snap = cli.json("inspect", "p", "--json")
    assert snap["summary"]["completions"][0]["output"] == 350
    assert snap["history"]["events"][0]["payload"]["initialAttributes"] == {"settled_total": 100}


def test_an_unknown_attribute_or_a_bad_value_is_a_usage_error(cli):
    res = cli("run", "--file", PAYMENT, "--input", INPUT, "--attribute", "nope=1")
    assert_error(res, 2, "one of the flow's attributes (payment_state, settled_total)")
    res = cli("run", "--file", PAYMENT, "--input", INPUT, "--attribute", "settled_total=abc")
    assert_error(res, 2, "--attribute settled_total is not valid JSON")
