"""The JSON contract: `inspect --json`, `run --json` (JSON lines), `list --json`."""

from __future__ import annotations

import json
import re

import pytest

from tests.cli.cli_helpers import start_flow

ISO_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

SUMMARY_KEYS = {"flowId", "runId", "flowType", "flowStatus", "startTime", "closeTime", "errorType",
                "errorMessage", "completions"}
COMPLETION_KEYS = {"stepType", "stepExecutionId", "output"}
STEP_KEYS = {"stepExecutionId", "stepType", "fromStepExecutionId", "status", "input", "decision",
             "recoveryError", "lastHeartbeatTime", "lastHeartbeatValue", "attempts"}
ATTEMPT_KEYS = {"attempt", "startTime", "endTime", "outcome", "errorType", "detail"}
MESSAGE_KEYS = {"value", "source", "createdTime", "resumeToken"}
EVENT_KEYS = {"eventId", "eventTime", "type", "payload"}


def walk(obj, path=""):
    """Every (path, key, value) in a JSON tree."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path, k, v
            yield from walk(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk(v, f"{path}[{i}]")


def assert_times_are_iso_utc(snap):
    n = 0
    for path, key, value in walk(snap):
        if key.endswith("Time") and value is not None:
            assert isinstance(value, str) and ISO_Z.match(value), (path, key, value)
            n += 1
    assert n > 0


def assert_camel_case(snap, skip=("output", "input", "value", "lastHeartbeatValue")):
    for path, key, _ in walk(snap):
        if any(f".{s}" in path for s in skip) or path.startswith(".streams") and key not in MESSAGE_KEYS:
            continue  # user data and stream names are not ours to name
        assert "_" not in key and key[:1].islower(), (path, key)


@pytest.fixture
def demo(cli):
    cli.ok("run", "polling", "--flow-id", "demo", "--time-skip")
    return cli.json("inspect", "demo", "--json")


def test_inspect_json_shape(demo):
    assert {"summary", "steps", "streams", "history"} <= set(demo)
    s = demo["summary"]
    assert set(s) >= SUMMARY_KEYS
    assert (s["flowId"], s["flowType"], s["flowStatus"]) == ("demo", "PollingFlow", "FLOW_STATUS_COMPLETED")
    assert s["errorType"] is None and s["errorMessage"] is None and s["runId"]
    assert s["completions"] == [{"stepType": "AwaitJob", "stepExecutionId": "AwaitJob-1",
                                 "output": "artifact for demo"}]
    assert all(set(c) == COMPLETION_KEYS for c in s["completions"])

    assert [st["stepExecutionId"] for st in demo["steps"]] == ["StartJob-1", "AwaitJob-1"]
    for st in demo["steps"]:
        assert set(st) >= STEP_KEYS, STEP_KEYS - set(st)
        assert st["status"] == "COMPLETED" and st["recoveryError"] is None
        for a in st["attempts"]:
            assert set(a) >= ATTEMPT_KEYS
    start, wait = demo["steps"]
    assert start["fromStepExecutionId"] not in ("StartJob-1", "AwaitJob-1")  # the flow start
    assert wait["fromStepExecutionId"] == "StartJob-1" and wait["input"] == "demo"
    assert wait["decision"]["kind"] == "gracefulComplete"
    assert [(a["attempt"], a["outcome"], a["errorType"]) for a in wait["attempts"]] == [(1, "COMPLETED", None)]

    assert list(demo["streams"]) == ["JobProgress"]
    msgs = demo["streams"]["JobProgress"]
    assert [m["value"]["state"] for m in msgs] == ["QUEUED", "RUNNING"]
    for m in msgs:
        assert set(m) == MESSAGE_KEYS
        assert m["source"] == "#AwaitJob-1" and isinstance(m["resumeToken"], str)

    events = demo["history"]["events"]
    types = [e["type"] for e in events]
    assert types[0] == "FlowStartedOrContinued" and types[-1] == "FlowClosed"
    assert types.count("StepExecuteCompleted") == 2
    ids = [int(e["eventId"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    for e in events:
        assert set(e) == EVENT_KEYS
    closed = events[-1]["payload"]
    assert closed["flowStatus"] == "FLOW_STATUS_COMPLETED"


def test_inspect_json_times_are_iso_utc_with_z(demo):
    assert_times_are_iso_utc(demo)
    s = demo["summary"]
    assert s["startTime"] <= s["closeTime"]


def test_inspect_json_keys_are_camel_case(demo):
    assert_camel_case(demo)


def test_inspect_json_of_a_failed_flow_with_recovery(cli):
    cli.ok("run", "polling", "--flow-id", "slow", "--job-duration", "15m", "--time-skip", code=1)
    snap = cli.json("inspect", "slow", "--json")
    s = snap["summary"]
    assert s["flowStatus"] == "FLOW_STATUS_FAILED" and s["errorType"] == "STEP_DECISION_FAILED"
    assert s["closeTime"] is not None and s["completions"] == []
    rec = snap["steps"][-1]
    assert rec["stepType"] == "RecordJobWaitFailure" and rec["fromStepExecutionId"] == "AwaitJob-1"
    assert set(rec["recoveryError"]) == {"errorType", "detail"}
    assert rec["recoveryError"]["errorType"] in ("StartToClose", "ScheduleToClose")
    wait = snap["steps"][1]
    assert wait["status"] == "FAILED" and wait["attempts"][0]["outcome"] == "TIMED_OUT"
    assert wait["attempts"][0]["errorType"] == rec["recoveryError"]["errorType"]
    assert wait["lastHeartbeatValue"] == "RUNNING"  # the checkpoint: the last reported state
    assert_times_are_iso_utc(snap)
    assert_camel_case(snap)


def test_inspect_json_of_a_running_flow(cli, db):
    start_flow(db, "three-steps", "q", 1)
    snap = cli.json("inspect", "q", "--json")
    s = snap["summary"]
    assert s["flowStatus"] == "FLOW_STATUS_RUNNING" and s["closeTime"] is None
    steps = [(st["stepExecutionId"], st["status"], st["attempts"]) for st in snap["steps"]]
    assert steps == [("First-1", "QUEUED", [])]


def test_run_json_prints_one_event_per_line_then_the_inspect_object(cli):
    res = cli.ok("run", "polling", "--flow-id", "demo", "--json", "--time-skip")
    lines = res.stdout.splitlines()
    objs = [json.loads(ln) for ln in lines]  # every line is JSON
    events, final = objs[:-1], objs[-1]
    assert events and all({"type", "flowId", "time"} <= set(e) for e in events)
    assert {e["flowId"] for e in events} == {"demo"}
    assert all(ISO_Z.match(e["time"]) for e in events)
    assert events[-1]["type"] == "flowClosed"
    times = [e["time"] for e in events]
    assert times == sorted(times)
    inspect = cli.json("inspect", "demo", "--json")
    final.pop("now"), inspect.pop("now")
    assert final == inspect
    assert res.stderr == ""


def test_run_json_of_a_failed_flow_exits_1_and_still_ends_with_the_object(cli):
    res = cli.ok("run", "polling", "--flow-id", "bad", "--job-fails", "--json", "--time-skip", code=1)
    final = json.loads(res.stdout.splitlines()[-1])
    assert final["summary"]["flowStatus"] == "FLOW_STATUS_FAILED"


def test_run_json_lines_begin_with_flow_started_once(cli):
    res = cli.ok("run", "three-steps", "--flow-id", "t", "--input", "3", "--json")
    *events, final = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert [e["type"] for e in events] == ["flowStarted"] + ["attemptStarted", "stepCompleted"] * 3 + ["flowClosed"]
    assert events[0]["flowType"] == "ThreeStepFlow" and events[0]["runId"] == final["summary"]["runId"]


def test_run_json_lines_of_a_run_that_replaces_a_running_one_are_its_own(cli, db):
    """The start terminates the previous run under the id first: that close is not this run's."""
    start_flow(db, "three-steps", "t", 1)
    res = cli.ok("run", "three-steps", "--flow-id", "t", "--input", "3", "--json",
                 "--id-reuse-policy", "allow-terminate-if-running")
    *events, final = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert events[0]["type"] == "flowStarted" and events[0]["runId"] == final["summary"]["runId"]
    assert [e["status"] for e in events if e["type"] == "flowClosed"] == ["COMPLETED"]


@pytest.fixture
def several(cli, db):
    cli.ok("run", "three-steps", "--flow-id", "a", "--input", "1")
    cli.ok("run", "polling", "--flow-id", "b", "--time-skip")
    cli.ok("run", "polling", "--flow-id", "c", "--job-fails", "--time-skip", code=1)
    cli.ok("run", "three-steps", "--flow-id", "d", "--input", "2")
    start_flow(db, "three-steps", "e", 3)
    return cli


def test_list_json_is_summaries_newest_first(several):
    rows = several.json("list", "--json")
    assert [r["flowId"] for r in rows] == ["e", "d", "c", "b", "a"]
    for r in rows:
        assert set(r) >= SUMMARY_KEYS
        assert ISO_Z.match(r["startTime"])
    starts = [r["startTime"] for r in rows]
    assert starts == sorted(starts, reverse=True)
    assert {r["flowId"]: r["flowStatus"] for r in rows} == {
        "a": "COMPLETED", "b": "COMPLETED", "c": "FAILED", "d": "COMPLETED", "e": "RUNNING"}


@pytest.mark.parametrize("args, ids", [
    (["--status", "COMPLETED"], ["d", "b", "a"]),
    (["--status", "failed"], ["c"]),  # case does not matter
    (["--status", "RUNNING"], ["e"]),
    (["--status", "CANCELED"], []),
    (["--type", "PollingFlow"], ["c", "b"]),
    (["--type", "ThreeStepFlow", "--status", "COMPLETED"], ["d", "a"]),
    (["--limit", "2"], ["e", "d"]),
    (["--type", "PollingFlow", "--limit", "1"], ["c"]),
    (["--type", "NoSuchFlow"], []),
])
def test_list_json_filters(several, args, ids):
    assert [r["flowId"] for r in several.json("list", "--json", *args)] == ids
