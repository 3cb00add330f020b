"""`dex run --timeout/--timeout-policy/--start-delay/--id-reuse-policy/--request-id`, in
virtual time (`--time-skip`): each applied with Dex's semantics, shown by `dex inspect` (the
summary) and `--json`; a bad value is one line and exit 2."""

from __future__ import annotations

import pytest

from tests.cli.cli_helpers import assert_error


def test_a_timeout_fails_a_long_flow_with_flow_timeout(cli):
    res = cli("run", "polling", "--flow-id", "p", "--job-duration", "5m", "--timeout", "10s", "--time-skip")
    assert res.exit_code == 1, res.output
    assert "FLOW_TIMEOUT: Flow timed out after 10 seconds" in res.stdout
    summary = cli.json("inspect", "p", "--json")["summary"]
    assert (summary["flowStatus"], summary["errorType"]) == ("FLOW_STATUS_FAILED", "FLOW_TIMEOUT")
    assert (summary["timeout"], summary["timeoutPolicy"], summary["timeoutFired"]) == (10, "FAIL", True)
    text = cli.ok("inspect", "p").stdout
    assert "Options: timeout 10.0 s (FAIL) fired" in text
    assert "FlowTimedOut" in text and "Flow timed out after 10 seconds → FAIL" in text


def test_the_cancel_policy_ends_the_flow_canceled(cli):
    res = cli("run", "polling", "--flow-id", "p", "--job-duration", "5m", "--timeout", "10s",
              "--timeout-policy", "cancel", "--time-skip")
    assert res.exit_code != 0
    assert cli.json("inspect", "p", "--json")["summary"]["flowStatus"] == "FLOW_STATUS_CANCELED"


def test_a_start_delay_is_skipped_to_and_shown(cli):
    cli.ok("run", "three-steps", "--input", "3", "--flow-id", "t", "--start-delay", "1h", "--request-id", "R1",
           "--time-skip")
    snap = cli.json("inspect", "t", "--json")
    assert (snap["summary"]["startDelay"], snap["summary"]["requestId"]) == (3600, "R1")
    assert snap["history"]["events"][0]["payload"]["startDelay"] == 3600
    assert snap["summary"]["completions"][0]["output"] == 11
    text = cli.ok("inspect", "t").stdout
    assert "Options: start delay 1 h" in text and "delayed 1 h" in text


def test_an_id_reuse_policy_lets_a_new_run_take_a_closed_flows_id(cli):
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t", "--time-skip")
    assert_error(cli("run", "three-steps", "--input", "2", "--flow-id", "t"), 4, "flow t already exists")
    assert_error(cli("run", "three-steps", "--input", "2", "--flow-id", "t", "--id-reuse-policy",
                     "allow-if-previous-failed"), 4, "already exists (COMPLETED)")
    cli.ok("run", "three-steps", "--input", "2", "--flow-id", "t", "--id-reuse-policy", "allow-if-not-running",
           "--time-skip")
    summary = cli.json("inspect", "t", "--json")["summary"]
    assert summary["idReusePolicy"] == "ALLOW_IF_NOT_RUNNING" and summary["completions"][0]["output"] == 9
    old = [f for f in cli.json("list", "--json") if f["flowId"].startswith("t$")]
    assert len(old) == 1 and old[0]["completions"][0]["output"] == 7
    assert "id reuse ALLOW_IF_NOT_RUNNING" in cli.ok("inspect", "t").stdout


@pytest.mark.parametrize("args,fragment", [
    (("--timeout", "1.5s"), "--timeout: '1.5s' is not whole seconds"),
    (("--timeout", "soon"), "--timeout: 'soon' is not a duration"),
    (("--start-delay", "-5"), "--start-delay"),
    (("--timeout-policy", "nope", "--timeout", "5s"), "--timeout-policy must be one of default, fail, cancel"),
    (("--timeout-policy", "fail"), "--timeout-policy needs a positive --timeout"),
    (("--timeout", "5s", "--timeout-policy", "handler"), "has no handle_timeout override"),
    (("--id-reuse-policy", "sometimes"), "--id-reuse-policy must be one of default, allow-if-previous-failed"),
    (("--request-id", ""), "--request-id must not be empty"),
])
def test_bad_start_options_are_one_line_and_exit_2(cli, args, fragment):
    assert_error(cli("run", "three-steps", "--input", "1", "--flow-id", "x", *args), 2, fragment)
    assert cli("inspect", "x").exit_code != 0  # nothing was started


def test_run_help_names_the_start_options(cli):
    out = cli.ok("run", "--help").stdout
    for flag in ("--timeout", "--timeout-policy", "--start-delay", "--id-reuse-policy", "--request-id",
                 "allow-terminate-if-running"):
        assert flag in out, flag
