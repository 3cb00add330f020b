"""`dex inspect --json` carries the official Dex CLI's keys and value forms where the two
overlap (docs/inspect-json.md): the keys and forms of `dexcli flow inspect`
(cli/internal/command/flow.go, flow_operations.go; protojson for the server's messages), with
dex's own keys beside them."""

from __future__ import annotations

import re
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import Cli, drive_until

GO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z$")  # Go's .999999999: no trailing zeros
PROTO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})?Z$")  # protojson Timestamp
PROTO_DURATION = re.compile(r"^\d+(\.\d{3}|\.\d{6}|\.\d{9})?s$")

SUMMARY_KEYS = ["flowId", "runId", "firstRunId", "requestId", "flowType", "flowStatus", "flowStatusCode",
                "startTime", "closeTime"]
HISTORY_KEYS = {"flowId", "runId", "events", "nextPageToken", "nextInternalEventId"}
STATE_KEYS = {"flowConfig", "attributes", "activeStepExecutions", "queuedSteps", "pendingChannelMessages",
              "completedSteps"}
ACTIVE_KEYS = {"stepExecutionId", "fromStepExecutionId", "stepType", "phase", "movement", "waitingCondition",
               "completedConditions", "stepExecutionLocals", "timers", "lastFailureInfo", "wait"}

FLOWS = '''
from datetime import timedelta

from dexcli import (Attribute, AttributeMap, Channel, Context, Flow, PersistenceSchema, RPCResult, Step, StepDecision,
                    StepList, Timer, Wait, graceful_complete, rpc)

go = Channel("go", str)
status = Attribute("status", str)
notes = AttributeMap("notes", str)


class Gate(Step[str]):
    def wait_for(self, context: Context, input: str) -> Wait:
        context.set_step_execution_local("asked", input)
        return Wait.any_of(go.for_one(condition_id="go"), Timer.by_duration(timedelta(hours=1), condition_id="soon"))

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(input)


class GateFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Gate())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(go, status, notes)

    @rpc
    def nudge(self, context: Context, who: str) -> RPCResult[str]:
        status.set(context, "nudged")
        notes.set(context, who, "hi")
        return RPCResult(who)


class Flaky(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        if context.attempt == 1:
            raise ValueError("not yet")
        return graceful_complete(input)


class FlakyFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Flaky())
'''


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    path = tmp_path / "contract_flows.py"
    path.write_text(textwrap.dedent(FLOWS))
    return path


def _start(db: Path, spec: str, flow_id: str, input: Any) -> None:
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import Store

    store = Store(db)
    try:
        flow, ref = load_flow(None, spec)
        build_engine(store, time_skip=False).start_flow(flow, flow_id, input, flow_ref=ref)
    finally:
        store.close()


def test_a_completed_flow_in_the_dex_cli_forms(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t", "--request-id", "req-1")
    snap = cli.json("inspect", "t", "--json")
    assert list(snap)[:3] == ["summary", "history", "state"]  # the Dex CLI's three; dex's own follow
    assert {"steps", "streams", "now", "overdue"} <= set(snap)

    s = snap["summary"]
    assert list(s)[:len(SUMMARY_KEYS)] == SUMMARY_KEYS
    assert s["firstRunId"] == s["runId"] and s["requestId"] == "req-1"
    assert (s["flowStatus"], s["flowStatusCode"]) == ("FLOW_STATUS_COMPLETED", 2)
    assert GO_TIME.match(s["startTime"]) and GO_TIME.match(s["closeTime"]), (s["startTime"], s["closeTime"])
    assert s["completions"] == [{"stepType": "Third", "stepExecutionId": "Third-1", "output": 7}]  # dex's own

    h = snap["history"]
    assert set(h) == HISTORY_KEYS and (h["flowId"], h["runId"]) == ("t", s["runId"])
    assert h["nextPageToken"] == "" and h["nextInternalEventId"] == 6
    events = h["events"]
    assert all(list(e) == ["eventId", "eventTime", "type", "payload"] for e in events)
    assert [e["eventId"] for e in events] == ["1", "2", "3", "4", "5"]  # protojson's int64: a string
    assert all(PROTO_TIME.match(e["eventTime"]) for e in events)
    assert [e["type"] for e in events] == ["FlowStartedOrContinued"] + ["StepExecuteCompleted"] * 3 + ["FlowClosed"]

    started = events[0]["payload"]
    assert started["flowExecutionId"] == {"flowId": "t", "runId": s["runId"]}
    assert started["flowType"] == "ThreeStepFlow"
    assert started["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
    assert started["initialStart"] == {"startStepType": "First", "stepInput": 1, "initialAttributes": []}

    context = events[1]["payload"]["context"]
    assert (context["stepExecutionId"], context["fromStepExecutionId"], context["stepType"],
            context["finalAttempt"]) == ("First-1", "__start__", "First", 1)
    assert PROTO_TIME.match(context["startedTime"]) and PROTO_DURATION.match(context["duration"])

    closed = events[-1]["payload"]
    assert closed["flowStatus"] == "FLOW_STATUS_COMPLETED" and closed["errorType"] is None
    assert closed["results"] == [{"completedStepType": "Third", "completedStepExecutionId": "Third-1",
                                  "completedStepOutput": 7}]

    state = snap["state"]
    assert set(state) >= STATE_KEYS
    assert state["completedSteps"] == closed["results"]
    assert state["queuedSteps"] == [] and state["activeStepExecutions"] == []


def test_a_failed_flow_closes_with_the_servers_error_type(cli: Cli) -> None:
    cli.ok("run", "polling", "--flow-id", "bad", "--job-fails", "--time-skip", code=1)
    snap = cli.json("inspect", "bad", "--json")
    assert (snap["summary"]["flowStatus"], snap["summary"]["flowStatusCode"]) == ("FLOW_STATUS_FAILED", 3)
    assert snap["summary"]["errorType"] == "STEP_DECISION_FAILED"  # dex's own key keeps dex's name
    closed = snap["history"]["events"][-1]["payload"]
    assert closed["errorType"] == "FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW" and closed["results"] == []


def test_a_step_no_attempt_has_started_is_queued_not_active(cli: Cli, flows: Path) -> None:
    cli.ok("start", "--file", f"{flows}:FlakyFlow", "--input", "4", "--flow-id", "q", "--timeout", "1h")
    snap = cli.json("inspect", "q", "--json")
    assert (snap["summary"]["flowStatus"], snap["summary"]["flowStatusCode"], snap["summary"]["closeTime"]) == (
        "FLOW_STATUS_RUNNING", 1, None)
    state = snap["state"]
    assert state["activeStepExecutions"] == []
    assert state["queuedSteps"] == [{"stepType": "Flaky", "stepInput": 4,
                                     "fromStepExecutionIdInternalOnly": "__start__", "stepExecutionId": "Flaky-1"}]
    started = snap["history"]["events"][0]["payload"]
    assert (started["flowTimeout"], started["flowTimeoutPolicy"]) == ("3600s", "FLOW_TIMEOUT_POLICY_FAIL")


def test_a_retrying_step_has_its_last_failure_info(cli: Cli, db: Path, flows: Path) -> None:
    from dexcli.store import StepState

    _start(db, f"{flows}:FlakyFlow", "r", 4)
    drive_until(db, "r", lambda store: store.steps_of("r")[0].status is StepState.BACKOFF)
    [active] = cli.json("inspect", "r", "--json")["state"]["activeStepExecutions"]
    assert set(active) == ACTIVE_KEYS
    assert (active["stepExecutionId"], active["fromStepExecutionId"], active["phase"]) == (
        "Flaky-1", "__start__", "ACTIVE_STEP_PHASE_ACTIVE")
    assert active["movement"] == {"stepType": "Flaky", "stepInput": 4, "fromStepExecutionIdInternalOnly": "__start__"}
    failure = active["lastFailureInfo"]
    assert failure["attempt"] == 1 and failure["backendError"] == "builtins.ValueError: not yet"
    details = failure["details"]
    assert (details["originalWorkerErrorType"], details["originalWorkerErrorDetail"], details["subStatus"]) == (
        "builtins.ValueError", "not yet", "ERROR_SUB_STATUS_WORKER_API_ERROR")
    assert "raise ValueError" in details["originalWorkerErrorStackTrace"]


def test_a_waiting_step_has_its_locals_timers_and_completed_conditions(cli: Cli, db: Path, flows: Path) -> None:
    from dexcli.store import StepState

    _start(db, f"{flows}:GateFlow", "g", "ann")
    drive_until(db, "g", lambda store: store.steps_of("g")[0].status is StepState.WAITING)
    state = cli.json("inspect", "g", "--json")["state"]
    [active] = state["activeStepExecutions"]
    assert set(active) == ACTIVE_KEYS and active["phase"] == "ACTIVE_STEP_PHASE_WAITING"
    condition = active["waitingCondition"]  # the server's WaitingConditionState; dex's own Wait is `wait`
    assert condition["waitingConditionType"] == "WAITING_CONDITION_TYPE_ANY_COMPLETED"
    assert condition["channelConditions"] == [{"conditionId": "go", "channelName": "go", "atLeast": 1, "atMost": 1}]
    assert [c["conditionId"] for c in condition["timerConditions"]] == ["soon"]
    assert condition["conditionCombinations"] == [] and active["wait"]["kind"] == "any_of"
    assert state["pendingChannelMessages"] == {} and state["attributes"] == []
    assert active["stepExecutionLocals"] == [{"key": "asked", "value": "ann"}]
    assert active["completedConditions"] == {"completedTimerConditions": {}}
    [timer] = active["timers"]
    fired_at = datetime.fromisoformat(timer["firingTime"].replace("Z", "+00:00"))
    assert timer["firingUnixTimestampSeconds"] == str(int(fired_at.timestamp()))  # an int64, in whole seconds
    assert condition["timerConditions"][0]["firingUnixTimestampSeconds"] == timer["firingUnixTimestampSeconds"]
    assert (timer["conditionId"], timer["status"]) == ("soon", "INTERNAL_TIMER_STATUS_PENDING")
    assert datetime.fromtimestamp(int(timer["firingUnixTimestampSeconds"]), UTC) <= fired_at

    cli.ok("skip-timer", "g", "Gate-1", "--condition-id", "soon")
    [active] = cli.json("inspect", "g", "--json")["state"]["activeStepExecutions"]
    assert active["completedConditions"] == {"completedTimerConditions": {"0": "INTERNAL_TIMER_STATUS_SKIPPED"}}
    assert active["phase"] == "ACTIVE_STEP_PHASE_ACTIVE"  # the wait is over: its execute is due


def test_history_json_is_the_dex_cli_flow_history_shape(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t")
    history = cli.json("inspect", "t", "--history", "--json")
    assert set(history) == HISTORY_KEYS and history["events"][0]["type"] == "FlowStartedOrContinued"


def test_attributes_and_channel_messages_in_the_servers_forms(cli: Cli, db: Path, flows: Path, tmp_path: Path) -> None:
    from dexcli.store import StepState

    _start(db, f"{flows}:GateFlow", "g", "ann")
    drive_until(db, "g", lambda store: store.steps_of("g")[0].status is StepState.WAITING)
    cli.ok("rpc", "g", "nudge", "--input", '"bob"', "--file", f"{flows}:GateFlow")
    state = cli.json("inspect", "g", "--json")["state"]
    assert state["attributes"] == [{"key": "notes/bob", "value": "hi"}, {"key": "status", "value": "nudged"}]
    assert state["attributesByName"] == {"status": "nudged", "notes": {"bob": "hi"}}  # dex's own
    assert state["attributeMaps"] == ["notes"]
