"""`dex time-travel`: the friendly flags and the Dex CLI's own, the new run id printed, every
refusal as one line with its exit code, `dex inspect` showing the runs (and an earlier one with
--run-id), and the way out for a flow whose step was renamed under it (real processes: a fresh
import of the edited flow file)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, assert_error, drive_until, subprocess_env


@pytest.fixture
def done(cli: Cli) -> str:
    """A three-steps flow run to its end: First-1 -> Second-1 -> Third-1 -> 7."""
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1", "--time-skip")
    return str(cli.json("inspect", "t", "--json")["summary"]["runId"])


def test_to_step_prints_the_new_run_and_inspect_shows_both_runs(cli: Cli, done: str) -> None:
    res = cli.ok("time-travel", "t", "--to-step", "Second", "--reason", "fix")
    new_run = res.stdout.strip()
    assert new_run and new_run != done
    assert f"run {done} is kept" in res.stderr and "dex resume t" in res.stderr
    snap = cli.json("inspect", "t", "--json")
    assert snap["summary"]["runId"] == new_run
    assert [(r["runId"], r["via"]) for r in snap["runs"]] == [(done, None), (new_run, "timeTravel")]
    assert [s["stepExecutionId"] for s in snap["steps"]] == ["First-1", "Second-1"]
    text = cli.ok("inspect", "t").stdout
    assert " Runs" in text and f"from {done[:8]} by time travel" in text
    old = cli.json("inspect", "t", "--run-id", done, "--json")
    assert old["summary"]["runId"] == done and old["summary"]["flowStatus"] == "FLOW_STATUS_COMPLETED"
    cli.ok("resume", "t", "--time-skip")
    assert cli.json("inspect", "t", "--json")["summary"]["completions"][0]["output"] == 7


@pytest.mark.parametrize("args", [
    ("--to-start",), ("--to-step", "Second-1"), ("--to-step", "Second-1", "--step-method", "execute"),
    ("--to-step", "Second", "--step-method", "execute"),
    ("--type", "beginning"), ("--type", "step-type", "--target", "Third"),
    ("--type", "step-execution-id", "--target", "First-1", "--step-method", "wait-for"),
])
def test_each_form_makes_a_new_run(cli: Cli, done: str, args: tuple[str, ...]) -> None:
    out = cli.json("time-travel", "t", *args, "--json")
    assert out["flowId"] == "t" and out["previousRunId"] == done and out["runId"] != done
    assert cli.json("inspect", "t", "--json")["summary"]["flowStatus"] == "FLOW_STATUS_RUNNING"


def test_the_dex_cli_form_with_run_id_and_yes(cli: Cli, done: str) -> None:
    at = cli.json("inspect", "t", "--json")["history"]["events"][1]["eventTime"]
    out = cli.json("time-travel", "t", "--run-id", done, "--type", "history-event-time", "--target", at,
                   "--reason", "x", "--yes", "--json")
    fork = next(e for e in cli.json("inspect", "t", "--json")["history"]["events"] if e["type"] == "TimeTravelFork")
    assert out["previousRunId"] == done and fork["payload"]["targetEventId"] == 1


def test_at_a_time_keeps_the_events_before_it(cli: Cli, done: str) -> None:
    events = cli.json("inspect", "t", "--json")["history"]["events"]
    at = events[2]["eventTime"]  # ms resolution: the events before it may share its millisecond
    before = [e["type"] for e in events if e["eventTime"] < at] or [events[0]["type"]]  # the start is kept
    cli.ok("time-travel", "t", "--at", at)
    kept = [e["type"] for e in cli.json("inspect", "t", "--json")["history"]["events"]]
    assert kept[:len(before) + 1] == [*before, "TimeTravelFork"] and len(before) <= 2


@pytest.mark.parametrize(("args", "code", "fragment"), [
    (("--to-step", "Nope"), 2, "step type Nope never ran in run"),
    (("--to-step", "Second-9"), 2, "no step execution Second-9 in run"),
    (("--at", "2099-01-01T00:00:00Z"), 2, "has no history event at or after 2099-01-01T00:00:00.000Z"),
    (("--at", "soon"), 2, "'soon' is not a time"),
    ((), 2, "say where to travel to"),
    (("--to-start", "--to-step", "First"), 2, "not --to-step and --to-start"),
    (("--to-start", "--step-method", "execute"), 2, "--step-method goes with --to-step"),
    (("--to-step", "First", "--step-method", "later"), 2, "--step-method must be wait-for or execute"),
    (("--type", "sideways"), 2, "--type must be beginning"),
    (("--type", "step-type"), 2, "--type step-type needs --target"),
    (("--type", "step-execution-id", "--target", "First-1"), 2, "needs --step-method wait-for or execute"),
    (("--type", "step-type", "--target", "First", "--step-method", "execute"), 2,
     "--step-method is only valid for --type step-execution-id"),
    (("--to-start", "--target", "x"), 2, "--target goes with --type"),
    (("--to-start", "--run-id", "other"), 4, "run other is not the current run of flow t"),
])
def test_refusals_are_one_line_and_change_nothing(cli: Cli, done: str, args: tuple[str, ...], code: int,
                                                  fragment: str) -> None:
    before = cli.json("inspect", "t", "--json")
    assert_error(cli("time-travel", "t", *args), code, fragment)
    after = cli.json("inspect", "t", "--json")
    assert after["summary"]["runId"] == done and after["history"] == before["history"]


def test_an_unknown_flow_or_run_exits_3(cli: Cli, done: str) -> None:
    assert_error(cli("time-travel", "nope", "--to-start"), 3, "no flow with id 'nope'")
    assert_error(cli("inspect", "t", "--run-id", "nope"), 3, "flow t has no run nope")


# --- the way out for a flow whose code changed under it ----------------------------------------

ORDER_FLOW = '''
from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class Reserve(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return go_to(Charge, input)


class Charge(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        raise RuntimeError("the card service is down")


class OrderFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Reserve()).other_steps(Charge())
'''

FIXED = ORDER_FLOW.replace("Charge", "ChargeCard").replace(
    'raise RuntimeError("the card service is down")', 'return graceful_complete(f"charged {input}")')


def _dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dexcli", *args], env=subprocess_env(db), capture_output=True,
                          text=True, timeout=120)


def test_a_renamed_step_is_a_way_out_by_time_travel(tmp_path: Path) -> None:
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import Store

    db, path = tmp_path / "dex.db", tmp_path / "orders.py"
    path.write_text(textwrap.dedent(ORDER_FLOW))
    store = Store(db)
    try:
        flow, ref = load_flow(file=f"{path}:OrderFlow")
        build_engine(store, time_skip=False).start_flow(flow, "o", "book", flow_ref=ref)
    finally:
        store.close()
    drive_until(db, "o", lambda s: any(x.step_type == "Charge" and x.attempt >= 1 for x in s.steps_of("o")))
    path.write_text(textwrap.dedent(FIXED))  # the fix renamed Charge to ChargeCard

    res = _dex(db, "resume", "o", "--time-skip")
    assert res.returncode == 2 and "step Charge is no longer in the flow" in res.stderr
    assert "dex time-travel o --to-step STEP" in res.stderr
    # travelling to where Charge is still open is refused with the same reason; to Reserve it works
    res = _dex(db, "time-travel", "o", "--to-step", "Charge")
    assert res.returncode == 2 and "step Charge (Charge-1, open at that point) is no longer in the flow" in res.stderr
    res = _dex(db, "time-travel", "o", "--to-step", "Reserve", "--reason", "Charge renamed")
    assert res.returncode == 0, res.stderr
    new_run = res.stdout.strip()
    res = _dex(db, "resume", "o", "--time-skip", "--json")
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout.splitlines()[-1])
    assert snap["summary"]["runId"] == new_run
    assert snap["summary"]["completions"][0]["output"] == "charged book"
    assert [s["stepExecutionId"] for s in snap["steps"]] == ["Reserve-1", "ChargeCard-1"]
    old = json.loads(_dex(db, "inspect", "o", "--json").stdout)["runs"][0]
    assert old["status"] == "TERMINATED" and old["runId"] != new_run
