"""FlowConfig and continue-as-new from the command line: `dex run/start --config KEY=VALUE`,
`dex config FLOW [--set KEY=VALUE]`, `dex continue-as-new FLOW`. Each shows up in `dex inspect`
(text and --json); each bad input is one line with its exit code, and a refused command changes
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.attrstore.stores import sqlite_store
from tests.cli.cli_helpers import Cli, assert_error

ALL_SET = ("--config", "step-durability=async", "--config", "continue-as-new-threshold=100",
           "--config", "active-step-search-mode=all", "--config", "attribute-store-names=a,b")
STORED_ALL = {"stepDurability": "STEP_DURABILITY_ASYNC", "continueAsNewThreshold": 100,
              "activeStepSearchMode": "ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL",
              "attributeStoreNames": {"names": ["a", "b"]}}


@pytest.fixture(autouse=True)
def attribute_stores(cli: Cli) -> None:
    """A dex.toml with the Attribute Stores a and b, which attribute-store-names may name."""
    toml = ['[attribute_store]', 'default = "a"']
    for name in ("a", "b"):
        sqlite_store(cli.cwd / f"{name}.db")
        toml += [f"[attribute_store.stores.{name}]", f'path = "{name}.db"', 'table_name = "profiles"']
    (cli.cwd / "dex.toml").write_text("\n".join(toml) + "\n")


def _config(cli: Cli, flow_id: str) -> dict[str, Any]:
    config: dict[str, Any] = cli.json("inspect", flow_id, "--json")["state"]["flowConfig"]
    return config


def _events(cli: Cli, flow_id: str) -> list[str]:
    return [e["type"] for e in cli.json("inspect", flow_id, "--json")["history"]["events"]]


def test_start_config_sets_each_field_and_inspect_shows_it(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p", *ALL_SET)
    assert _config(cli, "p") == STORED_ALL
    text = cli.ok("inspect", "p").stdout
    assert (" Config:  step durability ASYNC · active step search ENABLED_FOR_ALL · continue as new after 100 events"
            " · attribute stores a, b") in text
    shown = cli.ok("config", "p").stdout.splitlines()
    assert shown[0].startswith("flow p · run ") and shown[0].endswith(" · RUNNING")
    assert [line.split() for line in shown[1:]] == [
        ["step-durability", "async"], ["continue-as-new-threshold", "100", "events"],
        ["continue-as-new-page-size-bytes", "0", "(1", "MiB)", "(default)"], ["active-step-search-mode", "all"],
        ["attribute-store-names", "a,b"]]
    assert cli.json("config", "p", "--json")["flowConfig"] == STORED_ALL


def test_sdk_and_protojson_key_names_work_too(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p", "--config", "step_durability=ASYNC", "--config",
           "continueAsNewPageSizeInBytes=2048", "--config", "active_step_search_mode=with_wait_for",
           "--config", "attribute-store-names=")
    assert _config(cli, "p") == {"stepDurability": "STEP_DURABILITY_ASYNC", "continueAsNewPageSizeInBytes": 2048,
                                 "activeStepSearchMode": "ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_STEPS_WITH_WAIT_FOR",
                                 "attributeStoreNames": {}}
    assert "attribute-store-names            none" in cli.ok("config", "p").stdout


def test_run_config_threshold_continues_the_run_as_new_while_it_runs(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t", "--config", "continue-as-new-threshold=2",
           "--time-skip")
    view = cli.json("inspect", "t", "--json")
    assert view["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED" and view["summary"]["completions"][0]["output"] == 7
    assert view["state"]["flowConfig"]["continueAsNewThreshold"] == 2
    assert len(view["runs"]) >= 2 and view["summary"]["firstRunId"] != view["summary"]["runId"]
    assert "continue as new after 2 events" in cli.ok("inspect", "t").stdout
    cli.ok("doctor")


def test_config_set_merges_into_the_running_flow_and_prints_the_result(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p", "--config", "step-durability=async",
           "--config", "attribute-store-names=a")
    res = cli.ok("config", "p", "--set", "continue-as-new-threshold=50", "--set", "stepDurability=sync")
    assert "step-durability                  sync\n" in res.stdout
    assert "continue-as-new-threshold        50 events\n" in res.stdout
    assert "attribute-store-names            a\n" in res.stdout  # kept: only the fields set change
    assert "updated step-durability, continue-as-new-threshold" in res.stderr
    assert _config(cli, "p") == {"stepDurability": "STEP_DURABILITY_SYNC", "continueAsNewThreshold": 50,
                                 "attributeStoreNames": {"names": ["a"]}}
    updated = [e for e in cli.json("inspect", "p", "--json")["history"]["events"] if e["type"] == "FlowConfigUpdated"]
    assert [e["payload"]["update"] for e in updated] == [
        {"stepDurability": "STEP_DURABILITY_SYNC", "continueAsNewThreshold": 50}]
    out = cli.json("config", "p", "--set", "active-step-search-mode=disabled", "--json")
    assert out["flowId"] == "p" and out["update"] == {"activeStepSearchMode": "ACTIVE_STEP_SEARCH_MODE_DISABLED"}
    assert out["flowConfig"] == _config(cli, "p") and out["flowConfig"]["continueAsNewThreshold"] == 50


def test_a_threshold_the_run_has_reached_rolls_it_over_at_once_and_says_so(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p")
    before = cli.json("inspect", "p", "--json")["summary"]["runId"]
    res = cli.ok("config", "p", "--set", "continue-as-new-threshold=1")  # the update itself is a tracked event
    after = cli.json("inspect", "p", "--json")["summary"]["runId"]
    assert after != before and f"run {after}" in res.stdout
    assert f"continued as new, run {after} (run {before} is kept)" in res.stderr


def test_continue_as_new_prints_the_new_run_and_inspect_shows_the_chain(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p", "--config", "step-durability=async")
    first = cli.json("inspect", "p", "--json")["summary"]["runId"]
    res = cli.ok("continue-as-new", "p", "--reason", "nightly rollover")
    new_run = res.stdout.strip()
    assert res.stdout == f"{new_run}\n" and new_run != first and f"run {first} is kept" in res.stderr
    view = cli.json("inspect", "p", "--json")
    assert view["summary"]["runId"] == new_run and view["summary"]["firstRunId"] == first
    assert view["state"]["flowConfig"]["stepDurability"] == "STEP_DURABILITY_ASYNC"  # carried to the new run
    continued = view["history"]["events"][0]
    assert continued["payload"]["reason"] == "nightly rollover" and continued["payload"]["previousRunId"] == first
    assert [s["stepExecutionId"] for s in view["steps"]] == ["StartJob-1"]  # the queued step carried over
    assert "by continue-as-new" in cli.ok("inspect", "p").stdout
    out = cli.json("continue-as-new", "p", "--json")
    assert out["flowId"] == "p" and out["previousRunId"] == new_run and out["runId"] != new_run
    assert cli.json("inspect", "p", "--json")["summary"]["runId"] == out["runId"]
    old = cli.json("inspect", "p", "--run-id", first, "--json")["summary"]
    assert old["flowStatus"] == "FLOW_STATUS_CONTINUED_AS_NEW"
    assert "p: COMPLETED" in cli.ok("worker", "--until-idle", "--time-skip").stdout  # the new run goes on
    cli.ok("doctor")


def _unchanged(cli: Cli, flow_id: str, before: dict[str, Any]) -> bool:
    now = cli.json("inspect", flow_id, "--json")
    return (now["summary"], now["history"], now["runs"], [(s["stepExecutionId"], s["status"]) for s in now["steps"]]) \
        == (before["summary"], before["history"], before["runs"],
            [(s["stepExecutionId"], s["status"]) for s in before["steps"]])


def test_continue_as_new_takes_the_dex_cli_run_id_and_yes_and_a_stale_run_id_changes_nothing(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p")
    first = cli.json("inspect", "p", "--json")
    run = first["summary"]["runId"]
    assert_error(cli("continue-as-new", "p", "--run-id", "other", "--yes"), 4,
                 f"run other is not the current run of flow p ({run})")
    assert _unchanged(cli, "p", first)  # refused: the run, its history and steps as they were
    out = cli.json("continue-as-new", "p", "--run-id", run, "--yes", "--json")
    assert out["previousRunId"] == run and out["runId"] != run
    assert_error(cli("continue-as-new", "p", "--run-id", run), 4,  # that run is history now
                 f"run {run} is not the current run of flow p ({out['runId']})")
    assert cli.json("inspect", "p", "--json")["summary"]["runId"] == out["runId"]
    new_run = cli.ok("continue-as-new", "p", "--yes").stdout.strip()  # --yes alone: the current run
    assert new_run not in (run, out["runId"])
    cli.ok("stop", "p")
    closed = cli.json("inspect", "p", "--json")
    assert_error(cli("continue-as-new", "p", "--run-id", new_run, "--yes"), 4, "already CANCELED")
    assert _unchanged(cli, "p", closed)
    assert_error(cli("continue-as-new", "nope", "--run-id", new_run), 3, "no flow with id 'nope'")


@pytest.mark.parametrize("pair,fragment", [
    ("nope=1", "unknown key 'nope'; the keys are step-durability, continue-as-new-threshold"),
    ("step-durability", "give KEY=VALUE"),
    ("=async", "give KEY=VALUE"),
    ("step-durability=fast", "step-durability must be one of default, sync, async, not 'fast'"),
    ("active-step-search-mode=some", "active-step-search-mode must be one of default, all, with-wait-for, disabled"),
    ("continue-as-new-threshold=x", "continue-as-new-threshold takes a whole number, not 'x'"),
    ("continue-as-new-threshold=-1", "continue-as-new-threshold must be >= 0, got -1"),
    ("continue-as-new-threshold=3000000000", "continue-as-new-threshold must be at most 2147483647"),
    ("continue-as-new-page-size-bytes=99999999", "continue-as-new-page-size-bytes must be at most 4194304"),
    ("attribute-store-names=a,,b", "attribute-store-names takes names separated by commas"),
    ("worker_target=w1", "worker_target=...) routes steps to a Worker endpoint"),
])
def test_a_bad_config_pair_is_one_line_and_exit_2_and_nothing_starts(cli: Cli, pair: str, fragment: str) -> None:
    for command in (("start", "polling"), ("run", "three-steps", "--input", "1")):
        assert_error(cli(*command, "--flow-id", "x", "--config", pair), 2, "--config ", fragment)
        assert cli("inspect", "x").exit_code == 3  # nothing was started
    cli.ok("start", "polling", "--flow-id", "p", "--config", "step-durability=async")
    before = cli.json("inspect", "p", "--json")
    good = "continue-as-new-threshold=5" if pair.startswith("step-durability") else "step-durability=sync"
    assert_error(cli("config", "p", "--set", good, "--set", pair), 2, "--set ", fragment)
    after = cli.json("inspect", "p", "--json")
    assert after["state"]["flowConfig"] == before["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_ASYNC"}
    assert after["history"] == before["history"]  # no FlowConfigUpdated


def test_an_attribute_store_dex_toml_does_not_define_is_refused_and_nothing_changes(cli: Cli) -> None:
    assert_error(cli("start", "polling", "--flow-id", "x", "--config", "attribute-store-names=a,zzz"), 2,
                 "unknown Attribute Store 'zzz'")
    assert cli("inspect", "x").exit_code == 3
    cli.ok("start", "polling", "--flow-id", "p", "--config", "attribute-store-names=b")
    before = cli.json("inspect", "p", "--json")["history"]
    assert_error(cli("config", "p", "--set", "attribute-store-names=zzz"), 2, "unknown Attribute Store 'zzz'")
    assert cli.json("inspect", "p", "--json")["history"] == before
    assert _config(cli, "p")["attributeStoreNames"] == {"names": ["b"]}


def test_a_key_given_twice_is_refused(cli: Cli) -> None:
    assert_error(cli("start", "polling", "--config", "step-durability=sync", "--config", "step_durability=async"),
                 2, "--config: step-durability is given twice")
    assert not cli.db.exists()  # refused before the database opens


def test_missing_and_closed_flows_exit_as_dex_stop_does_and_nothing_changes(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p")
    assert_error(cli("config", "nope"), 3, "no flow with id 'nope'")
    assert_error(cli("config", "nope", "--set", "step-durability=async"), 3, "no flow with id 'nope'")
    assert_error(cli("continue-as-new", "nope"), 3, "no flow with id 'nope'")
    cli.ok("stop", "p")
    before = cli.json("inspect", "p", "--json")
    assert_error(cli("continue-as-new", "p"), 4, "flow p is already CANCELED: only a running flow can continue as new")
    assert_error(cli("config", "p", "--set", "step-durability=async"), 4,
                 "flow p is already CANCELED: only a running flow's config can change")
    assert_error(cli("stop", "p"), 4, "already CANCELED")  # the same codes as dex stop
    after = cli.json("inspect", "p", "--json")
    assert {k: v for k, v in after.items() if k != "now"} == {k: v for k, v in before.items() if k != "now"}
    assert [f["flowId"] for f in cli.json("list", "--json")] == ["p"]  # no new run
    assert cli.ok("config", "p").stdout.startswith("flow p · run ")  # a closed flow's config still reads
    assert_error(cli("continue-as-new", "p", "--reason", " "), 2, "--reason must not be empty")


def test_an_earlier_run_cannot_continue_or_change(cli: Cli) -> None:
    cli.ok("start", "polling", "--flow-id", "p")
    first = cli.json("inspect", "p", "--json")["summary"]["runId"]
    cli.ok("continue-as-new", "p")
    assert_error(cli("continue-as-new", f"p${first}"), 4, "CONTINUED_AS_NEW")
    assert_error(cli("config", f"p${first}", "--set", "step-durability=async"), 4, "CONTINUED_AS_NEW")


def test_help_names_the_flags_and_commands(cli: Cli) -> None:
    top = cli.ok("--help").stdout
    assert "config " in top and "continue-as-new " in top
    for command in ("run", "start"):
        out = cli.ok(command, "--help").stdout
        assert "--config" in out and "continue-as-new-threshold" in out, command
    assert "--set" in cli.ok("config", "--help").stdout
    assert "new run id" in cli.ok("continue-as-new", "--help").stdout
