"""`dex start`: a flow started and left queued for a worker, with run's flags and checks."""

from __future__ import annotations

from pathlib import Path

from tests.cli.cli_helpers import Cli, assert_error


def test_start_leaves_the_flow_queued_and_a_worker_drives_it_to_the_end(cli: Cli) -> None:
    res = cli.ok("start", "polling", "--flow-id", "p1", "--job-duration", "2s")
    assert res.stdout == "p1\n"  # the id alone: `id=$(dex start polling)`
    assert "dex worker" in res.stderr
    snap = cli.json("inspect", "p1", "--json")
    assert snap["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING" and snap["summary"]["flowRef"] == "name:polling"
    (first,) = snap["steps"]
    assert first["status"] == "QUEUED" and first["attempts"] == []  # not leased to the start's process
    worker = cli.ok("worker", "--until-idle", "--time-skip")
    assert "p1: COMPLETED" in worker.stdout
    done = cli.json("inspect", "p1", "--json")
    assert done["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    assert done["summary"]["completions"][0]["output"] == "artifact for p1"


def test_start_json_takes_runs_input_start_options_and_attributes(cli: Cli) -> None:
    summary = cli.json("start", "three-steps", "--input", "5", "--flow-id", "t1", "--json", "--timeout", "1h",
                       "--request-id", "r-1")
    assert summary["flowId"] == "t1" and summary["flowType"] == "ThreeStepFlow"
    assert summary["flowStatus"] == "RUNNING" and summary["timeout"] == 3600 and summary["requestId"] == "r-1"
    assert cli.json("inspect", "t1", "--json")["summary"]["input"] == 5


def test_start_refuses_what_run_refuses(cli: Cli) -> None:
    cli.ok("start", "three-steps", "--input", "1", "--flow-id", "t1")
    assert_error(cli("start", "three-steps", "--input", "1", "--flow-id", "t1"), 4, "t1 already exists")
    assert_error(cli("start", "three-steps"), 2, "needs --input")
    assert_error(cli("start", "nosuch"), 3, "unknown flow 'nosuch'")
    assert_error(cli("start", "three-steps", "--input", "1", "--job-duration", "2s"), 2, "polling flow only")
    assert_error(cli("start", "three-steps", "--input", "{"), 2, "not valid JSON")


def test_start_help_lists_the_plugins_run_options(cli: Cli) -> None:
    out = cli.ok("start", "--help", db=False).stdout
    assert "without driving it" in out and "--job-duration" in out and "--attribute" in out
    assert "--crash-at" not in out and "--time-skip" not in out  # those are for a process that drives


def test_start_a_flow_of_ones_own_file_and_a_worker_loads_it_from_there(cli: Cli, user_files: dict[str, Path]) -> None:
    fid = cli.ok("start", "--file", f"{user_files['flows']}:OrderFlow", "--input", '{"item": "pen", "qty": 5}').stdout
    fid = fid.strip()
    assert fid and cli.json("inspect", fid, "--json")["summary"]["flowRef"] == f"file:{user_files['flows']}:OrderFlow"
    assert f"{fid}: COMPLETED" in cli.ok("worker", "--until-idle").stdout
    assert cli.json("inspect", fid, "--json")["summary"]["completions"][0]["output"] == 10


def test_a_refused_flow_id_runs_no_plugin_setup(cli: Cli, db: Path) -> None:
    """The polling plugin's before_start configures the job of the flow id it is given: a start
    refused for that id (exit 4) must leave the existing flow's job as it was."""
    from dexcli.engine.clock import Clock
    from dexcli.engine.host import StoreHost
    from dexcli.store import Store

    cli.ok("start", "polling", "--flow-id", "p1", "--job-fails")
    for command in ("start", "run"):
        assert_error(cli(command, "polling", "--flow-id", "p1", "--job-duration", "1s"), 4, "p1 already exists")
    store = Store(db)
    try:
        assert StoreHost(store, Clock()).kv_get("polling.jobs", "p1")["fails"] is True
    finally:
        store.close()
