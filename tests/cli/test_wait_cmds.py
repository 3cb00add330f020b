"""`dex rpc` and `dex skip-timer`: outputs, every error and its exit code, and what `dex inspect
--json` shows of a waiting flow (`state`, `steps[].waitFor`). The flows are brought to their
wait by an engine in this process and left there (nothing drives them while the commands run)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import Cli, assert_error

VOTES = '''
from dataclasses import dataclass
from datetime import timedelta

from dexcli import (Channel, Context, Flow, PersistenceSchema, RPCResult, Step, StepDecision, StepList, Timer,
                    Wait, graceful_complete, rpc)

votes = Channel("votes", str)


class Collect(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        return Wait.any_of(votes.for_n(2, condition_id="two"),
                           Timer.by_duration(timedelta(hours=1), condition_id="soon"),
                           Timer.by_duration(timedelta(hours=2)))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete({"votes": votes.results(context), "fired": context.has_timer_fired()})


class VoteFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Collect())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(votes)

    @rpc
    def vote(self, context: Context, who: str) -> RPCResult[str]:
        votes.publish(context, who)
        return RPCResult(f"vote from {who}")

    @rpc
    def boom(self, context: Context, who: str) -> RPCResult[str]:
        votes.publish(context, who)  # staged, then discarded
        raise ValueError(f"no voter called {who}")

    @rpc
    def count(self, context: Context) -> RPCResult[int]:
        return RPCResult(votes.size(context))
'''


def _wait(db: Path, ref_name: str | None, file: str | None, flow_id: str, input: Any) -> None:
    """Start a flow as `dex run` does and drive it until its step waits; leave it there."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import StepState, Store

    store = Store(db)
    try:
        engine = build_engine(store, time_skip=False)
        flow, ref = load_flow(ref_name, file)
        engine.start_flow(flow, flow_id, input, flow_ref=ref)
        engine.drive([flow_id], until=lambda: store.steps_of(flow_id)[0].status is StepState.WAITING)
    finally:
        store.close()


VOTES_FILE = ("--file", "votes.py:VoteFlow")  # (the tests run in tmp_path, beside it)


@pytest.fixture
def votes(db: Path, tmp_path: Path) -> str:
    """A VoteFlow `v` waiting for two votes or a 1 h timer ("soon") or a 2 h one (no id)."""
    path = tmp_path / "votes.py"
    path.write_text(textwrap.dedent(VOTES))
    _wait(db, None, f"{path}:VoteFlow", "v", "poll")
    return "v"


@pytest.fixture
def approval(db: Path) -> str:
    _wait(db, "approval", None, "a", {"title": "Laptop"})
    return "a"


# ------------------------------------------------------------------------------ dex rpc -----
def test_rpc_prints_the_output_as_json_and_the_publish_wakes_the_step(cli: Cli, approval: str) -> None:
    res = cli.ok("rpc", approval, "approve", "--input", '"dana"')
    assert json.loads(res.stdout) == "approved by dana"
    snap = cli.json("inspect", approval, "--json")
    assert snap["steps"][0]["status"] == "QUEUED"  # its execute runs for whoever drives it next
    assert snap["steps"][0]["waitFor"]["outcome"] == "COMPLETED"
    assert snap["history"]["events"][-2]["type"] == "RpcExecutionCompleted"


def test_rpc_json_names_the_flow_and_the_rpc(cli: Cli, votes: str, tmp_path: Path) -> None:
    (tmp_path / "who.json").write_text('"ann"')
    assert cli.json("rpc", votes, *VOTES_FILE, "vote", "--input", f"@{tmp_path / 'who.json'}", "--json") == {
        "flowId": "v", "rpcName": "vote", "output": "vote from ann"}
    assert cli.json("rpc", votes, *VOTES_FILE, "count") == 1


def test_an_rpc_that_raises_exits_1_and_commits_nothing(cli: Cli, votes: str) -> None:
    assert_error(cli("rpc", votes, *VOTES_FILE, "boom", "--input", '"eve"'), 1,
                 "rpc boom failed: builtins.ValueError: no voter called eve")
    snap = cli.json("inspect", votes, "--json")
    assert snap["state"]["pendingChannelMessages"] == {}
    assert "RpcExecutionCompleted" not in [e["type"] for e in snap["history"]["events"]]


def test_rpc_to_an_unknown_flow_exits_3(cli: Cli, votes: str) -> None:
    assert_error(cli("rpc", "nope", "vote", "--input", '"x"'), 3, "no flow with id 'nope'")


def test_rpc_to_a_closed_flow_exits_4_when_it_has_effects(cli: Cli, votes: str) -> None:
    cli.ok("stop", votes)
    assert_error(cli("rpc", votes, *VOTES_FILE, "vote", "--input", '"x"'), 4, "CANCELED", "vote")
    assert cli.json("rpc", votes, *VOTES_FILE, "count") == 0  # a read-only RPC is served from the closed run


def test_an_unknown_rpc_exits_2_listing_the_flows_rpcs(cli: Cli, votes: str) -> None:
    assert_error(cli("rpc", votes, *VOTES_FILE, "approve"), 2, "VoteFlow has no RPC 'approve'", "boom, count, vote")


@pytest.mark.parametrize(("args", "fragment"), [
    (["vote"], "RPC vote takes an input: pass --input JSON"),
    (["count", "--input", "1"], "RPC count takes no input"),
    (["vote", "--input", "{nope"], "--input is not valid JSON"),
    (["vote", "--input", "dana"], "a string is quoted in JSON: --input '\"dana\"'"),
    (["vote", "--input", "7"], "input for RPC vote"),
])
def test_rpc_input_mistakes_exit_2(cli: Cli, votes: str, args: list[str], fragment: str) -> None:
    assert_error(cli("rpc", votes, *VOTES_FILE, *args), 2, fragment)


def test_an_rpc_lock_conflict_exits_4(cli: Cli, votes: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from dexcli.engine import rpc
    from dexcli.sdk.errors import RpcLockConflictError

    def conflict(*args: Any) -> Any:
        raise RpcLockConflictError("attribute map instance is locked by another RPC")

    monkeypatch.setattr(rpc, "invoke", conflict)
    assert_error(cli("rpc", votes, *VOTES_FILE, "vote", "--input", '"x"'), 4, "locked by another RPC")


def test_rpc_without_a_database_exits_3(cli: Cli) -> None:
    assert_error(cli("rpc", "a", "approve"), 3, "no dex database")


# ------------------------------------------------------------------------------ skip-timer --
def test_skip_timer_by_condition_id_makes_the_wait_ready(cli: Cli, votes: str) -> None:
    res = cli.ok("skip-timer", votes, "Collect-1", "--condition-id", "soon")
    assert "skipped" in res.stdout
    snap = cli.json("inspect", votes, "--json")
    step = snap["steps"][0]
    assert step["status"] == "QUEUED" and step["waitFor"]["outcome"] == "COMPLETED"
    timers = snap["state"]["activeStepExecutions"][0]["timers"]
    assert [(t["conditionId"], t["status"]) for t in timers] == [("soon", "INTERNAL_TIMER_STATUS_SKIPPED")]
    assert snap["history"]["events"][-2]["type"] == "TimerSkipped"


def test_skip_timer_by_index(cli: Cli, votes: str) -> None:
    cli.ok("skip-timer", votes, "Collect-1", "--index", "1")  # the 2 h timer, which has no id
    timers = cli.json("inspect", votes, "--json")["state"]["activeStepExecutions"][0]["timers"]
    assert [(t["conditionIndex"], t["status"]) for t in timers] == [(1, "INTERNAL_TIMER_STATUS_SKIPPED")]


@pytest.mark.parametrize(("args", "fragment"), [
    (["Collect-2", "--index", "0"], "Collect-2 of flow v does not exist"),
    (["Collect-1", "--condition-id", "later"], "no timer with condition id 'later'"),
    (["Collect-1", "--index", "2"], "no timer with index 2"),
])
def test_skip_timer_of_no_such_step_or_timer_exits_3(cli: Cli, votes: str, args: list[str], fragment: str) -> None:
    assert_error(cli("skip-timer", votes, *args), 3, fragment)


def test_skip_timer_twice_exits_4(cli: Cli, votes: str) -> None:
    cli.ok("skip-timer", votes, "Collect-1", "--condition-id", "soon")
    assert_error(cli("skip-timer", votes, "Collect-1", "--condition-id", "soon"), 4, "not waiting")


def test_skip_timer_of_an_unknown_flow_exits_3_of_a_closed_one_4(cli: Cli, votes: str) -> None:
    assert_error(cli("skip-timer", "nope", "Collect-1", "--index", "0"), 3, "no flow with id 'nope'")
    cli.ok("stop", votes)
    assert_error(cli("skip-timer", votes, "Collect-1", "--index", "0"), 4, "CANCELED")


@pytest.mark.parametrize(("args", "fragment"), [
    ([], "exactly one of --condition-id ID and --index N"),
    (["--condition-id", "soon", "--index", "0"], "exactly one of"),
])
def test_skip_timer_needs_exactly_one_selector(cli: Cli, votes: str, args: list[str], fragment: str) -> None:
    assert_error(cli("skip-timer", votes, "Collect-1", *args), 2, fragment)


def test_skip_timer_checks_the_step_execution_id(cli: Cli, votes: str) -> None:
    assert_error(cli("skip-timer", votes, "Collect", "--index", "0"), 2, "looks like StepType-N")
    assert_error(cli("skip-timer", votes, "Collect-1", "--index", "-1"), 2, "--index")


# ------------------------------------------------------------------------------ inspect -----
def test_inspect_json_shows_the_waiting_state(cli: Cli, votes: str) -> None:
    cli.ok("rpc", votes, *VOTES_FILE, "vote", "--input", '"ann"')
    snap = cli.json("inspect", votes, "--json")
    assert set(snap) >= {"summary", "steps", "streams", "history", "now", "state"}
    [active] = snap["state"]["activeStepExecutions"]
    assert set(active) == {"stepExecutionId", "fromStepExecutionId", "stepType", "phase", "movement",
                           "waitingCondition", "completedConditions", "stepExecutionLocals", "timers",
                           "lastFailureInfo", "wait"}
    assert (active["stepExecutionId"], active["stepType"], active["phase"]) == (
        "Collect-1", "Collect", "ACTIVE_STEP_PHASE_WAITING")
    wait = active["wait"]  # dex's own form of `waitingCondition`
    assert wait["kind"] == "any_of"
    channel, soon, later = wait["conditions"]
    assert (channel["kind"], channel["conditionId"], channel["channel"], channel["atLeast"], channel["atMost"]) == (
        "channel", "two", "votes", 2, 2)
    assert (soon["kind"], soon["conditionId"], later["conditionId"]) == ("timer", "soon", None)
    assert soon["firingTime"].endswith("Z")
    assert [{k: t[k] for k in ("conditionId", "conditionIndex", "status")} for t in active["timers"]] == [
        {"conditionId": "soon", "conditionIndex": 0, "status": "INTERNAL_TIMER_STATUS_PENDING"},
        {"conditionId": None, "conditionIndex": 1, "status": "INTERNAL_TIMER_STATUS_PENDING"}]
    assert active["timers"][0]["firingTime"] == soon["firingTime"]
    assert snap["state"]["pendingChannelMessages"] == {"votes": {"values": ["ann"]}}
    [message] = snap["state"]["channelMessages"]["votes"]
    assert message["value"] == "ann" and len(message["messageId"]) == 36
    wf = snap["steps"][0]["waitFor"]
    assert set(wf) == {"startTime", "endTime", "outcome", "conditionResults", "maxAttempts"}
    assert wf["outcome"] == "WAITING" and wf["endTime"] is None and wf["startTime"].endswith("Z")
    assert [a["method"] for a in snap["steps"][0]["attempts"]] == ["WAIT_FOR"]


def test_inspect_json_of_a_closed_flow_keeps_the_last_known_state(cli: Cli, votes: str) -> None:
    cli.ok("rpc", votes, *VOTES_FILE, "vote", "--input", '"ann"')
    cli.ok("stop", votes)
    state = cli.json("inspect", votes, "--json")["state"]
    [active] = state["activeStepExecutions"]
    assert active["phase"] == "ACTIVE_STEP_PHASE_WAITING"
    assert [t["status"] for t in active["timers"]] == ["INTERNAL_TIMER_STATUS_PENDING"] * 2
    assert [m["value"] for m in state["channelMessages"]["votes"]] == ["ann"]


def test_inspect_json_after_the_wait_records_its_condition_results(cli: Cli, votes: str) -> None:
    cli.ok("rpc", votes, *VOTES_FILE, "vote", "--input", '"ann"')
    cli.ok("rpc", votes, *VOTES_FILE, "vote", "--input", '"bob"')
    snap = cli.json("inspect", votes, "--json")
    assert snap["state"]["pendingChannelMessages"] == {}
    assert snap["state"]["activeStepExecutions"][0]["phase"] == "ACTIVE_STEP_PHASE_ACTIVE"
    wf = snap["steps"][0]["waitFor"]
    assert wf["outcome"] == "COMPLETED" and wf["endTime"] is not None
    channel = wf["conditionResults"]["conditions"][0]
    assert channel["selected"] and channel["values"] == ["ann", "bob"]


def test_inspect_text_says_what_the_step_waits_for_and_how_to_move_it(cli: Cli, votes: str) -> None:
    out = cli.ok("inspect", votes).stdout
    # a timer fires at whole seconds (its commit time rounded down), so up to 1 s under its 1 h
    assert re.search(r"Collect-1 waits for any of: timer soon fires in (1 h|59 m 59 s) ", out), out
    assert "channel votes: 0 queued, needs 2 (two)" in out
    assert "dex skip-timer v Collect-1 --condition-id soon" in out and "dex skip-timer v Collect-1 --index 1" in out
    assert "dex rpc v NAME --input JSON --file votes.py:VoteFlow" in out  # (a file's code is named)


def test_steps_without_wait_for_have_no_wait_for_key(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    snap = cli.json("inspect", "t", "--json")
    assert all("waitFor" not in s for s in snap["steps"])
    assert snap["state"] == {"flowConfig": {"stepDurability": "STEP_DURABILITY_SYNC"}, "attributes": [],
                             "activeStepExecutions": [], "queuedSteps": [], "pendingChannelMessages": {},
                             "completedSteps": [{"completedStepType": "Third", "completedStepExecutionId": "Third-1",
                                                 "completedStepOutput": 7}],
                             "attributesByName": {}, "attributeMaps": [], "channelMessages": {}, "locks": [],
                             "attributeStore": []}


# ------------------------------------------------------------------------------ live view ---
def _render(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, no_color=True, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    text: str = console.export_text()
    console.file.close()
    return text


def _snap(db: Path, flow_id: str) -> dict[str, Any]:
    from dexcli.cli.app import store_now
    from dexcli.engine.views import inspect_flow
    from dexcli.store import Store

    store = Store(db)
    try:
        return inspect_flow(store, flow_id, store_now(store))
    finally:
        store.close()


def test_the_live_view_shows_timers_channels_and_the_commands(db: Path, votes: str) -> None:
    from dexcli.cli.render import live_view

    text = _render(live_view(_snap(db, votes), "dex.db", rpcs=("boom", "count", "vote")))
    assert "○ Collect-1" in text and "waiting (any of)" in text
    # a timer fires at its commit time rounded down to the second (rule 17): up to 1 s less is left
    assert re.search(r"timer soon fires in (1 h|59 m 59 s) \(at ", text), text
    assert re.search(r"timer #1 fires in (2 h|1 h 59 m 59 s|1 h 59 m) \(at ", text), text
    assert "channel votes: 0 queued, needs 2 (two)" in text
    assert "→ dex rpc v boom|count|vote --input JSON" in text
    assert "→ dex skip-timer v Collect-1 --condition-id soon" in text
    assert "→ dex skip-timer v Collect-1 --index 1" in text
    assert "only external input" not in text  # a timer will move it on


def test_plain_lines_print_the_wait_once_and_its_end(db: Path, cli: Cli, votes: str) -> None:
    from dexcli.cli.render import LineDiffer

    differ = LineDiffer(("vote",))
    first = differ.lines(_snap(db, votes))
    assert any("▶ Collect-1 wait_for attempt 1/" in ln for ln in first)
    assert any("✓ Collect-1 wait_for returned its Wait" in ln for ln in first)
    assert any("○ Collect-1 waiting for any of: timer soon fires in" in ln for ln in first)
    assert any(ln.endswith("  → dex rpc v vote --input JSON --file votes.py:VoteFlow") for ln in first)
    assert differ.lines(_snap(db, votes)) == []
    cli.ok("skip-timer", votes, "Collect-1", "--index", "1")
    assert any("✓ Collect-1 wait over (completed): #2" in ln for ln in differ.lines(_snap(db, votes)))


def test_a_wait_only_others_can_end_is_said_so(db: Path, cli: Cli, votes: str) -> None:
    from dexcli.cli.render import LineDiffer, live_view
    from dexcli.cli.render_wait import EXTERNAL_INPUT

    snap = _snap(db, votes)
    for a in snap["state"]["activeStepExecutions"]:
        for t in a["timers"]:
            t["status"] = "FIRED"  # as if no timer were left: only an RPC can move it on
    assert EXTERNAL_INPUT in _render(live_view(snap, "dex.db"))
    assert any(EXTERNAL_INPUT in ln for ln in LineDiffer().lines(snap))
