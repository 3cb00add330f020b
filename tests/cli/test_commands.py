"""Each command and flag through CliRunner, in virtual time (`--time-skip`)."""

from __future__ import annotations

import re
import sqlite3
import tomllib

import pytest
import typer

from dexcli.cli.main import app
from tests.cli.cli_helpers import assert_error, drive_until, start_flow

ANSI = re.compile(r"\x1b\[")


# ------------------------------------------------------------------------- run
def test_run_polling_in_virtual_time(cli):
    res = cli.ok("run", "polling", "--flow-id", "demo", "--time-skip")
    out = res.stdout
    assert out.splitlines()[0].startswith(" dex · PollingFlow · demo · db ")
    assert str(cli.db) in out.splitlines()[0]
    for expected in ("StartJob-1 goTo AwaitJob", "AwaitJob-1 attempt 1/3 started", "JobProgress QUEUED",
                     "JobProgress RUNNING", "AwaitJob-1 gracefulComplete", "COMPLETED in",
                     'result: "artifact for demo"', "dex inspect demo"):
        assert expected in out, expected
    assert out.index("JobProgress QUEUED") < out.index("JobProgress RUNNING") < out.index("COMPLETED")
    assert not ANSI.search(res.output)
    assert res.stderr == ""


def test_run_generates_a_flow_id(cli):
    res = cli.ok("run", "three-steps", "--input", "4")
    fid = re.search(r"dex inspect (\S+)", res.stdout).group(1)
    assert fid.startswith("threestep-")
    assert cli.json("inspect", fid, "--json")["summary"]["completions"][0]["output"] == 13


def test_run_input_from_a_file(cli, tmp_path):
    (tmp_path / "in.json").write_text("5")
    res = cli.ok("run", "three-steps", "--flow-id", "t", "--input", f"@{tmp_path / 'in.json'}")
    assert "result: 15" in res.stdout


def test_run_failed_flow_exits_1(cli):
    res = cli.ok("run", "polling", "--flow-id", "bad", "--job-fails", "--time-skip", code=1)
    assert "FAILED in" in res.stdout and "job bad failed" in res.stdout
    assert cli.json("inspect", "bad", "--json")["summary"]["errorType"] == "STEP_DECISION_FAILED"


def test_run_a_job_longer_than_the_wait_fails_through_the_recovery_step(cli):
    res = cli.ok("run", "polling", "--flow-id", "slow", "--job-duration", "15m", "--time-skip", code=1)
    assert "waiting for job slow failed: " in res.stdout
    snap = cli.json("inspect", "slow", "--json")
    assert [s["stepExecutionId"] for s in snap["steps"]] == ["StartJob-1", "AwaitJob-1", "RecordJobWaitFailure-1"]
    assert snap["steps"][1]["attempts"][-1]["outcome"] == "TIMED_OUT"
    assert snap["summary"]["errorMessage"].startswith("waiting for job slow failed: ")


def test_run_a_job_longer_than_the_wait_fails_with_start_to_close(cli):
    res = cli.ok("run", "polling", "--flow-id", "slow", "--job-duration", "15m", "--time-skip", code=1)
    assert "FAILED" in res.stdout
    assert "waiting for job slow failed: StartToClose: " in res.stdout


def test_run_a_users_flow_from_a_file(cli, user_files):
    res = cli.ok("run", "--file", f"{user_files['flows']}:OrderFlow", "--flow-id", "o1",
                 "--input", '{"item": "pen", "qty": 3}')
    assert "OrderFlow · o1" in res.stdout and "result: 6" in res.stdout
    snap = cli.json("inspect", "o1", "--json")
    assert snap["summary"]["flowRef"] == f"file:{user_files['flows']}:OrderFlow"


def test_run_a_module_level_flow_instance(cli, user_files):
    res = cli.ok("run", "--file", f"{user_files['flows']}:order_flow", "--input", '{"item": "pen", "qty": 5}')
    assert "result: 10" in res.stdout


# ------------------------------------------------------------------------- resume / worker / stop
def test_resume_drives_a_queued_flow_to_its_end(cli, db):
    start_flow(db, "three-steps", "q", 1)
    res = cli.ok("resume", "q", "--time-skip")
    assert "Third-1 gracefulComplete" in res.stdout and "result: 7" in res.stdout


def test_resume_json(cli, db):
    start_flow(db, "three-steps", "q", 2)
    lines = cli.ok("resume", "q", "--json").stdout.splitlines()
    import json

    assert json.loads(lines[-1])["summary"]["completions"][0]["output"] == 9


def test_resume_of_an_ended_flow_says_so(cli):
    cli.ok("run", "three-steps", "--flow-id", "done", "--input", "1")
    res = cli.ok("resume", "done")
    assert "COMPLETED" in res.stdout and "nothing to resume" in res.stdout
    cli.ok("run", "polling", "--flow-id", "bad", "--job-fails", "--time-skip", code=1)
    cli.ok("resume", "bad", code=1)


def test_worker_until_idle_drives_every_flow(cli, db):
    start_flow(db, "three-steps", "w1", 1)
    start_flow(db, "polling", "w2")
    res = cli.ok("worker", "--until-idle", "--time-skip")
    assert "w1: COMPLETED" in res.stdout and "w2: COMPLETED" in res.stdout
    assert "idle: 2 flow(s) finished" in res.stdout
    statuses = {s["flowId"]: s["flowStatus"] for s in cli.json("list", "--json")}
    assert statuses == {"w1": "COMPLETED", "w2": "COMPLETED"}


@pytest.mark.parametrize("kind, status, error_type", [
    ("cancel", "CANCELED", None), ("terminate", "TERMINATED", None), ("fail", "FAILED", "CLIENT_API_FAILED")])
def test_stop(cli, db, kind, status, error_type):
    start_flow(db, "polling", "s")
    res = cli.ok("stop", "s", "--type", kind, "--reason", "testing")
    assert f"flow s stopped ({kind})" in res.stdout
    summary = cli.json("inspect", "s", "--json")["summary"]
    assert (summary["flowStatus"], summary["errorType"], summary["errorMessage"]) == (
        f"FLOW_STATUS_{status}", error_type, "testing")
    res = cli.ok("resume", "s", code=1)  # ended, not completed
    assert "None:" not in res.stdout + cli.ok("inspect", "s").stdout  # no error type: the reason alone
    assert ("CLIENT_API_FAILED: testing" if error_type else "  testing") in res.stdout


# ------------------------------------------------------------------------- complete-job
def test_complete_job_of_the_one_running_polling_flow(cli, db):
    start_flow(db, "polling", "cj", job_duration=3600)
    # StartJob must have run for the job to exist (the engine checks `stop` after each transition)
    drive_until(db, "cj", lambda store: any(s.step_type == "AwaitJob" for s in store.steps_of("cj")))
    assert cli.json("inspect", "cj", "--json")["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING"
    res = cli.ok("complete-job")
    assert "job cj completed: SUCCEEDED" in res.stdout
    res = cli.ok("complete-job", "cj")  # idempotent
    assert "SUCCEEDED" in res.stdout
    res = cli.ok("resume", "cj", "--time-skip")
    assert 'result: "artifact for cj"' in res.stdout


# ------------------------------------------------------------------------- small commands
def test_flows_lists_names_classes_modules_descriptions(cli):
    out = cli.ok("flows", db=False).stdout
    lines = out.splitlines()
    assert len(lines) == 5
    approval = next(ln for ln in lines if ln.startswith("approval"))
    assert "ApprovalFlow" in approval and "flows.approval" in approval
    payment = next(ln for ln in lines if ln.startswith("payment"))
    assert "PaymentFlow" in payment and "flows.payment" in payment and "Attribute lock" in payment
    polling = next(ln for ln in lines if ln.startswith("polling"))
    assert "PollingFlow" in polling and "flows.polling" in polling and "simulated external job" in polling
    three = next(ln for ln in lines if ln.startswith("three-steps"))
    assert "ThreeStepFlow" in three and "flows.three_steps" in three
    fan = next(ln for ln in lines if ln.startswith("fan-out"))
    assert "FanOutFlow" in fan and "flows.fan_out" in fan and "SubFlows" in fan


def test_version(cli):
    from dexcli import __version__

    res = cli.ok("--version")
    assert res.stdout.strip() == f"dex {__version__}"


def test_list_text(cli):
    cli.ok("run", "three-steps", "--flow-id", "a", "--input", "1")
    cli.ok("run", "polling", "--flow-id", "b", "--job-fails", "--time-skip", code=1)
    out = cli.ok("list").stdout
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["flow", "id", "type"]
    assert lines[1].split()[:3] == ["b", "PollingFlow", "FAILED"]
    assert lines[2].split()[:3] == ["a", "ThreeStepFlow", "COMPLETED"] and lines[2].rstrip().endswith("7")
    assert "no flows match" in cli.ok("list", "--status", "canceled").stdout


def test_list_of_an_empty_database(cli):
    from dexcli.store import Store

    Store(cli.db).close()  # a dex database with no flow yet (a read command creates none)
    assert cli.ok("list").stdout.startswith("no flows in ")


# ------------------------------------------------------------------------- doctor
def test_doctor_after_runs_reports_no_problem(cli):
    cli.ok("run", "three-steps", "--flow-id", "a", "--input", "1")
    cli.ok("run", "polling", "--flow-id", "b", "--time-skip")
    cli.ok("run", "polling", "--flow-id", "c", "--job-duration", "15m", "--time-skip", code=1)
    res = cli.ok("doctor")
    assert res.stdout.strip().splitlines()[-1] == "3 flow(s) checked, 0 problem(s)"
    assert cli.ok("doctor", "b").stdout.strip() == "1 flow(s) checked, 0 problem(s)"


def test_doctor_reports_a_breach_after_the_database_is_corrupted(cli):
    cli.ok("run", "three-steps", "--flow-id", "a", "--input", "1")
    with sqlite3.connect(cli.db) as conn:
        n = conn.execute("DELETE FROM history WHERE flow_id = 'a' AND type = 'StepExecuteCompleted' "
                         "AND seq = (SELECT MAX(seq) FROM history WHERE flow_id = 'a' "
                         "AND type = 'StepExecuteCompleted')").rowcount
    conn.close()
    assert n == 1
    res = cli.ok("doctor", code=1)
    lines = res.stdout.strip().splitlines()
    assert lines[-1].startswith("1 flow(s) checked, ") and not lines[-1].endswith(" 0 problem(s)")
    assert any("a" in ln and "StepExecuteCompleted" in ln for ln in lines[:-1]), lines


def test_doctor_judges_wait_for_and_execute_attempts_apart(cli):
    """A flow that used WaitFor has a COMPLETED wait_for attempt (the Wait it returned) and a
    COMPLETED execute attempt: healthy, not two completions."""
    cli.ok("run", "approval", "--flow-id", "x1", "--input", '{"title": "t", "expire_after_seconds": 1}',
           "--time-skip")
    assert cli.ok("doctor").stdout.strip() == "1 flow(s) checked, 0 problem(s)"


@pytest.mark.parametrize("corruption, breach", [
    # the wait_for attempt that completed has a row of its own; the execute attempt that completed
    # the step is the step's row (see store/attempt_rows.py)
    ("UPDATE ended_attempts SET method = 'EXECUTE' WHERE attempt = 1", "completed execute attempts [1, 2]"),
    ("INSERT INTO ended_attempts (flow_id, step_execution_id, attempt, owner, start_time, end_time, outcome, "
     "method) SELECT flow_id, step_execution_id, 2, lease_owner, attempt_started_at, end_time, 'FAILED', "
     "'EXECUTE' FROM steps WHERE attempt = 2", "completed execute attempts []"),
    ("UPDATE steps SET method = 'WAIT_FOR' WHERE attempt = 2", "wait_for has completed attempts [1, 2]"),
])
def test_doctor_still_catches_a_breach_in_a_wait_for_step(cli, corruption, breach):
    cli.ok("run", "approval", "--flow-id", "x1", "--input", '{"title": "t", "expire_after_seconds": 1}',
           "--time-skip")
    with sqlite3.connect(cli.db) as conn:
        assert conn.execute(corruption + " AND step_execution_id = 'AwaitDecision-1'").rowcount == 1
    conn.close()
    lines = cli.ok("doctor", code=1).stdout.strip().splitlines()
    assert any(ln.startswith("x1 AwaitDecision-1: ") and breach in ln for ln in lines), lines


# ------------------------------------------------------------------------- init and help
def test_init_writes_a_commented_dex_toml_that_dex_then_uses(cli, tmp_path, monkeypatch):
    res = cli.ok("init", db=False)
    path = tmp_path / "dex.toml"
    assert f"wrote {path}" in res.stdout
    text = path.read_text()
    assert text.lstrip().startswith("#")
    cfg = tomllib.loads(text)
    assert cfg == {"db": ".dex/dex.db", "synchronous": "NORMAL"}
    cli.ok("run", "three-steps", "--flow-id", "x", "--input", "1", db=False)
    assert (tmp_path / ".dex" / "dex.db").exists()
    sub = tmp_path / "deeper" / "still"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)  # dex.toml is found in a parent folder
    assert cli.json("list", "--json", db=False)[0]["flowId"] == "x"
    monkeypatch.chdir(tmp_path)
    path.write_text("# mine\n")
    cli.ok("init", "--force", db=False)
    assert tomllib.loads(path.read_text())["db"] == ".dex/dex.db"


def _all_commands() -> list[list[str]]:
    group = typer.main.get_command(app)
    cmds = [[name] for name in group.list_commands(None)]  # type: ignore[arg-type]
    cmds.append(["time", "skip"])
    return cmds


@pytest.mark.parametrize("cmd", _all_commands(), ids=" ".join)
def test_every_command_has_help(cli, cmd):
    res = cli.ok(*cmd, "--help")
    out = res.stdout
    assert out.startswith(f"Usage: dex {' '.join(cmd)}")
    body = [ln for ln in out.splitlines()[1:] if ln.strip() and not ln.startswith(("Usage", "Options", "Arguments"))]
    assert body and len(body[0].strip()) > 15, out  # a description, not only the options


def test_root_help_lists_commands_and_exit_codes(cli):
    out = cli.ok("--help").stdout
    for name in ("run", "inspect", "watch", "list", "complete-job", "flows", "init", "doctor", "time"):
        assert re.search(rf"^\s+{name}\s", out, re.M), name
    assert "Exit codes" in out and "130 interrupted" in " ".join(out.split())


def test_expected_commands_exist():
    names = {c[0] for c in _all_commands()}
    assert {"run", "resume", "worker", "watch", "inspect", "list", "flows", "complete-job", "stop", "doctor",
            "init", "time"} <= names


def test_inspect_without_json_is_readable(cli):
    cli.ok("run", "polling", "--flow-id", "demo", "--time-skip")
    out = cli.ok("inspect", "demo").stdout
    assert out.splitlines()[0].startswith(" PollingFlow · demo · COMPLETED after 6.")
    assert 'Result:  "artifact for demo"' in out
    assert not ANSI.search(out)


def test_stderr_is_empty_on_success_and_errors_never_go_to_stdout(cli):
    res = cli("inspect", "ghost")
    assert_error(res, 3)
    assert res.stdout == ""
