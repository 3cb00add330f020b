"""Every user mistake: exact exit code, one line `dex: error: ...` on stderr, no traceback."""

from __future__ import annotations

import sqlite3

import pytest

from dexcli.store import Store
from tests.cli.cli_helpers import assert_error, start_flow


@pytest.fixture
def populated(cli):
    """A database with one completed flow `done` (three-steps, 1 -> 7)."""
    cli.ok("run", "three-steps", "--flow-id", "done", "--input", "1")
    return cli


# ------------------------------------------------------------------------- flow names / files
def test_unknown_flow_name_lists_the_known_ones(cli):
    line = assert_error(cli("run", "no-such-flow"), 3, "'no-such-flow'", "polling", "three-steps", "--file")
    assert "known flows" in line


def test_run_without_a_flow(cli):
    assert_error(cli("run"), 2, "dex flows", "--file")


def test_run_with_a_name_and_a_file(cli, user_files):
    assert_error(cli("run", "polling", "--file", f"{user_files['flows']}:OrderFlow"), 2, "not both")


def test_file_that_does_not_exist(cli, tmp_path):
    assert_error(cli("run", "--file", f"{tmp_path}/nope.py:Flow"), 2, "no such file", "nope.py")


def test_file_spec_without_a_class(cli, user_files):
    assert_error(cli("run", "--file", str(user_files["flows"])), 2, "path/to/module.py:FlowClass")


def test_file_without_that_class(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['flows']}:Missing"), 2, "has no Missing")


def test_file_attribute_that_is_not_a_flow(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['flows']}:not_a_flow"), 2, "not a dex Flow")


def test_file_class_that_needs_arguments(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['flows']}:NeedsArgs"), 2, "no arguments")


def test_file_that_fails_to_import_shows_the_line(cli, user_files):
    path = user_files["import_error"]
    line = assert_error(cli("run", "--file", f"{path}:F"), 2, "importing failed",
                        f"{path}:3", "ModuleNotFoundError", "no_such_module_for_dex_tests")
    assert "Traceback" not in line


def test_file_with_a_syntax_error_shows_the_line(cli, user_files):
    path = user_files["syntax"]
    assert_error(cli("run", "--file", f"{path}:F"), 2, "importing failed", f"{path}:2")


def test_invalid_flow_definition_shows_the_validation_message(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['invalid']}:BrokenFlow", "--input", '"x"'), 2,
                 "BrokenFlow", "step Work", "AsyncContext")
    if cli.db.exists():  # nothing was started
        assert cli.json("list", "--json") == []


# ------------------------------------------------------------------------- input
def test_malformed_input_json(cli):
    assert_error(cli("run", "three-steps", "--input", "{not json"), 2, "--input is not valid JSON", "line 1")


def test_input_file_that_cannot_be_read(cli, tmp_path):
    assert_error(cli("run", "three-steps", "--input", f"@{tmp_path}/missing.json"), 2, "--input", "cannot read")


def test_input_that_does_not_fit_the_start_step_type(cli):
    """The type the flow takes, an input that would fit, what was given and pydantic's complaint;
    nothing is started."""
    assert_error(cli("run", "three-steps", "--input", '"seven"'), 2,
                 "three-steps needs --input of type int (e.g. --input 5)", 'got "seven"',
                 "Input should be a valid integer")
    assert not cli.db.exists() or cli.json("list", "--json") == []


def test_missing_input_names_the_type_and_an_example(cli):
    assert_error(cli("run", "three-steps"), 2, "three-steps needs --input of type int (e.g. --input 5)")
    assert_error(cli("run", "polling", "--input", "5"), 2, "polling takes no --input", "leave --input out")


def test_missing_dataclass_input_shows_a_json_example_that_fits(cli, user_files):
    line = assert_error(cli("run", "--file", f"{user_files['flows']}:OrderFlow"), 2,
                        "OrderFlow needs --input of type Order")
    example = line.split("(e.g. --input ", 1)[1].rsplit(")", 1)[0]
    import shlex

    (given,) = shlex.split(example)
    res = cli.ok("run", "--file", f"{user_files['flows']}:OrderFlow", "--input", given)
    assert "result: 10" in res.stdout  # the example runs: qty 5, doubled


def test_input_that_does_not_fit_a_dataclass_names_the_field(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['flows']}:OrderFlow", "--input", '{"item": "a", "qty": "many"}'),
                 2, "Order", "'qty'")


def test_input_missing_a_dataclass_field(cli, user_files):
    assert_error(cli("run", "--file", f"{user_files['flows']}:OrderFlow", "--input", '{"item": "a"}'),
                 2, "qty")


# ------------------------------------------------------------------------- run options
def test_flow_id_that_exists_is_a_conflict(populated):
    assert_error(populated("run", "three-steps", "--flow-id", "done", "--input", "1"), 4, "done", "already exists")


def test_job_options_only_for_the_polling_flow(cli):
    assert_error(cli("run", "three-steps", "--input", "1", "--job-fails"), 2, "polling flow only")


@pytest.mark.parametrize("opt", ["--job-duration", "--crash-after"])
def test_bad_durations_on_run(cli, opt):
    assert_error(cli("run", "polling", opt, "soon"), 2, "'soon' is not a duration")


@pytest.mark.parametrize("args, fragment", [
    (["--crash-at", "nowhere"], "unknown crash point"),
    (["--crash-at", "heartbeat:x"], "must be a number"),
    (["--fail", "First:often"], "STEP[:N] with a number"),
    (["--stall", ":2"], "STEP[:N]"),
    (["--stall", "Second:0"], "N at least 1"),
    (["--fail", "Second:0"], "N at least 1"),
    (["--fail", "NoStep:2"], "--fail: the flow has no step 'NoStep'; its steps: First, Second, Third"),
    (["--stall", "NoStep:1"], "--stall: the flow has no step 'NoStep'"),
    (["--crash-at", "heartbeat@NoStep"], "--crash-at: the flow has no step 'NoStep'"),
])
def test_bad_fault_options(cli, args, fragment):
    assert_error(cli("run", "three-steps", "--input", "1", *args), 2, fragment)
    listed = cli("list")  # refused before anything started: no database yet, or no flow in it
    assert listed.exit_code == 3 or "no flows" in listed.stdout, listed.stdout


@pytest.mark.parametrize("args, fragment", [
    (["run", "polling", "--bogus"], "No such option: --bogus"),
    (["inspect"], "Missing argument"),
    (["list", "--limit", "0"], "--limit"),
    (["list", "--limit", "many"], "--limit"),
    (["no-such-command"], "No such command"),
])
def test_click_usage_errors_are_one_line_too(cli, args, fragment):
    assert_error(cli(*args), 2, fragment)


# ------------------------------------------------------------------------- flow ids
@pytest.mark.parametrize("cmd", [["inspect"], ["inspect", "--json"], ["watch"], ["resume"], ["doctor"], ["stop"]])
def test_unknown_flow_id_is_not_found(populated, cmd):
    args = [cmd[0], "ghost", *cmd[1:]]
    assert_error(populated(*args), 3, "ghost")


@pytest.mark.parametrize("cmd", [["inspect", "x"], ["list"], ["watch", "x"], ["doctor"], ["complete-job"]])
def test_commands_that_read_need_a_database(cli, cmd):
    assert_error(cli(*cmd), 3, "no dex database", str(cli.db))
    assert not cli.db.exists()


# ------------------------------------------------------------------------- databases
def test_a_file_that_is_not_a_database(cli, tmp_path):
    bad = tmp_path / "notes.db"
    bad.write_text("these are my notes, not a database\n" * 100)
    for args in (["list"], ["run", "three-steps", "--input", "1"]):
        assert_error(cli("--db", str(bad), *args), 5, "is not a dex database")
    assert bad.read_text().startswith("these are my notes")


def test_an_sqlite_database_of_another_application(cli, tmp_path):
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    assert_error(cli("--db", str(other), "list"), 5, "is not a dex database", "other tables")


def test_a_newer_schema_is_refused(populated):
    with sqlite3.connect(populated.db) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    for args in (["list"], ["inspect", "done"], ["run", "three-steps", "--input", "1"]):
        assert_error(populated(*args), 5, "schema version 99", "newer", "upgrade dex")


def test_a_database_path_that_cannot_be_written(cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert_error(cli("--db", str(blocker / "sub" / "dex.db"), "run", "three-steps", "--input", "1"), 5,
                 "cannot create the database folder")


def test_a_database_path_that_is_a_directory(cli, tmp_path):
    assert_error(cli("--db", str(tmp_path), "list"), 5, "is a directory")


# ------------------------------------------------------------------------- list / stop / time / init
def test_list_bad_status(populated):
    assert_error(populated("list", "--status", "DONE"), 2, "--status must be one of", "RUNNING", "COMPLETED")


def test_stop_bad_type_and_stopping_an_ended_flow(populated):
    assert_error(populated("stop", "done", "--type", "explode"), 2, "--type must be cancel, terminate or fail")
    assert_error(populated("stop", "done"), 4, "done", "already COMPLETED")


def test_time_skip_bad_duration(cli):
    assert_error(cli("time", "skip", "3 fortnights"), 2, "time skip", "is not a duration")
    assert_error(cli("time", "skip", "--", "-5s"), 2, "is not a duration")


def test_init_twice_is_a_conflict(cli):
    cli.ok("init")
    assert_error(cli("init"), 4, "dex.toml exists", "--force")


def test_a_broken_dex_toml(cli, tmp_path):
    (tmp_path / "dex.toml").write_text("db = [unterminated\n")
    assert_error(cli("list", db=False), 2, "dex.toml", "cannot read")


# ------------------------------------------------------------------------- complete-job
def test_complete_job_when_none_is_running(populated):
    assert_error(populated("complete-job"), 3, "no polling flow is running")


def test_complete_job_of_a_flow_without_a_job(populated, db):
    start_flow(db, "three-steps", "queued", input=1)  # RUNNING, but not a polling flow
    assert_error(populated("complete-job", "queued"), 3, "no simulated job", "queued")
    assert_error(populated("complete-job", "ghost"), 3, "no flow with id 'ghost'")


def test_complete_job_of_a_flow_that_has_ended_is_a_conflict(populated, db):
    """Whatever the flow's status, once it has ended there is no job to complete: exit 4, and
    nothing is written (it used to say it had completed the job, exit 0)."""
    populated.ok("run", "polling", "--flow-id", "p", "--job-duration", "3s", "--time-skip")
    populated.ok("run", "polling", "--flow-id", "f", "--job-duration", "3s", "--job-fails", "--time-skip", code=1)
    for flow_id, status in (("p", "COMPLETED"), ("f", "FAILED"), ("done", "COMPLETED")):
        assert_error(populated("complete-job", flow_id), 4, f"flow already {status}", flow_id)
    store = Store(db)
    try:
        assert store.kv_get("polling.jobs", "p")["completed_at"] is None  # the job was left as it ended
    finally:
        store.close()


def test_complete_job_of_a_polling_flow_whose_job_has_not_started(cli, db):
    start_flow(db, "polling", "early")  # queued: StartJob has not run, so there is no job yet
    assert_error(cli("complete-job", "early"), 3, "no simulated job", "early")


def test_complete_job_with_several_running_polling_flows(cli, db):
    start_flow(db, "polling", "p1")
    start_flow(db, "polling", "p2")
    assert_error(cli("complete-job"), 2, "2 polling flows are running", "p1", "p2", "name one")


# ------------------------------------------------------------------------- graph / lint, --db
def test_graph_and_lint_errors_are_one_line(cli, tmp_path):
    assert_error(cli("graph", "no-such-flow"), 3, "'no-such-flow'", "known flows")
    assert_error(cli("lint", "--file", f"{tmp_path}/nope.py:Flow"), 2, "no such file")


def test_db_option_is_accepted_after_the_command(cli, tmp_path):
    other = tmp_path / "elsewhere.db"
    cli.ok("run", "three-steps", "--flow-id", "here", "--input", "1", "--db", str(other))
    assert cli.ok("inspect", "here", f"--db={other}").stdout
    assert_error(cli("inspect", "here"), 3)  # the default database does not have it


def test_an_outcome_that_cannot_be_recorded_ends_the_run_with_one_line(cli, monkeypatch):
    """A database error while committing a step's outcome (here: the history insert) leaves the
    flow RUNNING; `dex run` says so in one line instead of waiting forever."""
    from dexcli.store import Tx

    original = Tx.add_event

    def failing(self, flow_id, now, type_, payload):
        if type_ == "StepExecuteCompleted":
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, flow_id, now, type_, payload)

    monkeypatch.setattr(Tx, "add_event", failing)
    res = cli("run", "three-steps", "--flow-id", "full", "--input", "1")
    assert_error(res, 5, "flow full", "could not be recorded", "database or disk is full", "dex resume full")
    monkeypatch.undo()
    assert cli.json("inspect", "full", "--json")["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING"
