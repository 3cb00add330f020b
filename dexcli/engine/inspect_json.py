"""`dex inspect --json`: the snapshot of `views.inspect_flow` in the Dex CLI's forms.

The official `dexcli flow inspect` prints `{summary, history, state}`; where dex's snapshot has
the same key, the JSON takes the Dex CLI's value form (its enums' names, its event envelope,
its times), and dex's own keys stay beside them (docs/inspect-json.md lists both, key by
key). The live view and the text commands render from the snapshot itself; only what is
printed as JSON (`inspect --json`, and the last line of `run/resume/watch --json`) goes
through `dex_cli_json`. Pure: no I/O, nothing heavier than the stdlib (the `inspect --json` fast
path imports it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dexcli.engine.wait_kinds import CHANNEL, SUBFLOW, TIMER

EVENT_TYPES = {"FlowStarted": "FlowStartedOrContinued", "FlowContinued": "FlowStartedOrContinued"}
"""dex's history event names that the server spells otherwise (dex's own events keep theirs)."""

FLOW_ERROR_TYPES = {
    "STEP_DECISION_FAILED": "FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW",
    "CLIENT_API_FAILED": "FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW",
    "WORKER_API_FAILED": "FLOW_ERROR_TYPE_WORKER_API_FAIL",
    "INVALID_USER_FLOW_CODE": "FLOW_ERROR_TYPE_INVALID_USER_FLOW_CODE",
    "FLOW_TIMEOUT": "FLOW_ERROR_TYPE_FLOW_TIMEOUT",
    "INTERNAL": "FLOW_ERROR_TYPE_INTERNAL",
}
ENVELOPE = ("eventId", "eventTime", "type")
STEP_EVENTS = ("StepExecuteCompleted", "StepExecuteFailed", "StepWaitForCompleted", "StepWaitForFailed")


def dex_cli_json(snap: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with the Dex CLI's keys first and its value forms where the two overlap."""
    return {"summary": _summary(snap["summary"]), "history": history_json(snap), "state": _state(snap),
            **{k: v for k, v in snap.items() if k not in ("summary", "history", "state")}}


def go_time(iso: str | None) -> str | None:
    """An ISO time as the Dex CLI prints the summary's (Go's RFC 3339 with .999999999: trailing
    zeros of the fraction dropped, and the point with them)."""
    if iso is None:
        return None
    whole, dot, rest = iso.partition(".")
    if not dot:
        return iso
    fraction = rest.rstrip("Z").rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


def proto_time(iso: str | None) -> str | None:
    """An ISO time as protojson writes a Timestamp (3, 6 or 9 digits of fraction, none for a
    whole second): dex's times are to the millisecond."""
    if iso is None:
        return None
    return iso.replace(".000Z", "Z")


def proto_duration(seconds: float) -> str:
    """A duration as protojson writes one: `3600s`, `0.010s`, `0.010397s` (0, 3, 6 or 9 digits)."""
    nanos = round(seconds * 1_000_000_000)
    for digits, unit in ((0, 1_000_000_000), (3, 1_000_000), (6, 1_000)):
        if nanos % unit == 0:
            return f"{nanos / 1_000_000_000:.{digits}f}s"
    return f"{nanos / 1_000_000_000:.9f}s"


def _status(status: str) -> str:
    return f"FLOW_STATUS_{status}"


def _summary(s: dict[str, Any]) -> dict[str, Any]:
    dex_cli = {"flowId": s["flowId"], "runId": s["runId"], "firstRunId": s["firstRunId"],
               "requestId": s.get("requestId") or "", "flowType": s["flowType"],
               "flowStatus": _status(s["flowStatus"]), "flowStatusCode": s["flowStatusCode"],
               "startTime": go_time(s["startTime"]), "closeTime": go_time(s["closeTime"])}
    return {**dex_cli, **{k: v for k, v in s.items() if k not in dex_cli}}


def history_json(snap: dict[str, Any], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """`history` as the Dex CLI's (`dexcli flow history`): the snapshot's events, or `events` of
    them (one step's); every page loaded, so no next page."""
    summary, every = snap["summary"], snap["history"]
    last = int(every[-1]["eventId"]) if every else 0
    return {"flowId": summary["flowId"], "runId": summary["runId"],
            "events": [_event(e, summary, snap["state"]) for e in (every if events is None else events)],
            "nextPageToken": "", "nextInternalEventId": last + 1}


def _event(e: dict[str, Any], summary: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """`{eventId, eventTime, type, payload}`: the id as protojson writes an int64 (a string), the
    payload dex's fields with the server's beside them where dex knows them."""
    kind = EVENT_TYPES.get(e["type"], e["type"])
    payload = {k: v for k, v in e.items() if k not in ENVELOPE}
    if kind == "FlowStartedOrContinued":
        payload = {**_started(payload, summary, state), **payload}
    elif kind == "FlowClosed":
        payload = _closed(payload)
    elif kind in STEP_EVENTS:
        payload = {**payload, "context": _step_context(payload)}
    return {"eventId": str(e["eventId"]), "eventTime": proto_time(e["eventTime"]), "type": kind, "payload": payload}


def _started(p: dict[str, Any], summary: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    initial: dict[str, Any] = {}
    if p.get("startStepType"):
        initial.update(startStepType=p["startStepType"], stepInput=p.get("input"))
    initial["initialAttributes"] = [{"key": k, "value": v} for k, v in (p.get("initialAttributes") or {}).items()]
    out: dict[str, Any] = {"flowExecutionId": {"flowId": summary["flowId"], "runId": p.get("runId", summary["runId"])},
                           "flowType": p.get("flowType", summary["flowType"]), "flowConfig": state["flowConfig"]}
    if p.get("timeout"):
        out.update(flowTimeout=proto_duration(p["timeout"]),
                   flowTimeoutPolicy=f"FLOW_TIMEOUT_POLICY_{p.get('timeoutPolicy') or 'FAIL'}")
    if "previousRunId" in p and "stepsToResume" in p:  # a continue-as-new's new run (FlowContinued)
        out["continuedStart"] = {
            "previousRunId": p["previousRunId"], "stepsToStart": p.get("stepsToStart", []),
            "stepsToResume": p.get("stepsToResume", []), "pendingChannelMessages": p.get("pendingChannelMessages", {}),
            "attributes": [{"key": k, "value": v} for k, v in (p.get("attributes") or {}).items()],
            "completedSteps": [{"completedStepType": c["stepType"], "completedStepExecutionId": c["stepExecutionId"],
                                "completedStepOutput": c["output"]} for c in p.get("completedSteps") or []]}
        return out
    out["initialStart"] = initial
    return out


def _closed(p: dict[str, Any]) -> dict[str, Any]:
    error = p.get("errorType")
    dex_cli = {"flowStatus": _status(p["flowStatus"]),
               "results": [{"completedStepType": r["stepType"], "completedStepExecutionId": r["stepExecutionId"],
                            "completedStepOutput": r["output"]} for r in p.get("results") or []],
               "errorType": FLOW_ERROR_TYPES.get(error, error) if error else None,
               "errorMessage": p.get("errorMessage")}
    return {**dex_cli, **{k: v for k, v in p.items() if k not in dex_cli}}


def _step_context(p: dict[str, Any]) -> dict[str, Any]:
    """The server's StepMethodEventContext of a step method's event, from dex's flat fields."""
    duration = p.get("duration")
    return {"stepExecutionId": p.get("stepExecutionId"), "fromStepExecutionId": p.get("fromStepExecutionId"),
            "stepType": p.get("stepType"), "finalAttempt": p.get("attempt"),
            "startedTime": proto_time(p.get("startedTime")),
            "duration": None if duration is None else proto_duration(duration)}


def _state(snap: dict[str, Any]) -> dict[str, Any]:
    """`state`: the active step executions the server would list (those no attempt has started
    are `queuedSteps` there), their phase and timers in its enum names and times."""
    s = snap["state"]
    queued = {q["stepExecutionId"] for q in s["queuedSteps"]}
    waits = {st["stepExecutionId"]: st.get("waitFor") for st in snap["steps"]}
    active = [_active(a, waits.get(a["stepExecutionId"])) for a in s["activeStepExecutions"]
              if a["stepExecutionId"] not in queued]
    pending = {queue: {"values": [m["value"] for m in messages]}
               for queue, messages in s["pendingChannelMessages"].items()}
    return {"flowConfig": s["flowConfig"], "attributes": s["attributeKeys"], "activeStepExecutions": active,
            "queuedSteps": s["queuedSteps"], "pendingChannelMessages": pending, "completedSteps": s["completedSteps"],
            # dex's own forms of the same data, under their own names
            "attributesByName": s["attributes"], "attributeMaps": s["attributeMaps"],
            "channelMessages": s["pendingChannelMessages"], "locks": s["locks"],
            "attributeStore": s.get("attributeStore", [])}


def _active(a: dict[str, Any], wait_for: dict[str, Any] | None) -> dict[str, Any]:
    """The server's phase is WAITING from the moment a wait is committed until it ends (while
    the wait_for method itself runs, the step is ACTIVE there; dex's view says WAITING then)."""
    wait = a["waitingCondition"]
    waiting = wait is not None and wait_for is not None and wait_for["endTime"] is None
    return {**a, "phase": "ACTIVE_STEP_PHASE_WAITING" if waiting else "ACTIVE_STEP_PHASE_ACTIVE",
            "waitingCondition": None if wait is None else _waiting_condition(wait),
            "timers": [_timer(t) for t in a["timers"]], "wait": wait}


WAIT_TYPES = {"all_of": "WAITING_CONDITION_TYPE_ALL_COMPLETED", "any_of": "WAITING_CONDITION_TYPE_ANY_COMPLETED",
              "any_combination_of": "WAITING_CONDITION_TYPE_ANY_COMBINATION_COMPLETED"}


def _waiting_condition(wait: dict[str, Any]) -> dict[str, Any]:
    """dex's persisted Wait as the server's WaitingConditionState (timers by their fixed firing
    second, channels by their queue's name)."""
    conditions = wait["conditions"]
    return {"waitingConditionType": WAIT_TYPES.get(wait["kind"], "WAITING_CONDITION_TYPE_UNSPECIFIED"),
            "timerConditions": [{"conditionId": c["conditionId"],
                                 "firingUnixTimestampSeconds": _unix_seconds(c["firingTime"])}
                                for c in conditions if c["kind"] == TIMER],
            "channelConditions": [{"conditionId": c["conditionId"], "channelName": c["queue"],
                                   "atLeast": c["atLeast"], "atMost": c["atMost"]}
                                  for c in conditions if c["kind"] == CHANNEL],
            # the server's SubFlowConditionState has the condition id; dex adds which child it is
            "subFlowConditions": [{"conditionId": c["conditionId"], "subFlowIndex": c["subFlowIndex"],
                                   "subFlowType": c["flowType"], "subFlowId": c.get("flowId"),
                                   "completed": c.get("result") is not None}
                                  for c in conditions if c["kind"] == SUBFLOW],
            "conditionCombinations": [{"conditionIds": [conditions[i]["conditionId"] for i in combo]}
                                      for combo in wait.get("combinations", [])]}


def _unix_seconds(iso: str) -> str:
    """An ISO time in whole Unix seconds, rounded down as the server's interpreter fixes a timer's
    firing time (an int64: a string)."""
    return str(int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() // 1))


def _timer(t: dict[str, Any]) -> dict[str, Any]:
    """A TimerInfo: the firing time in whole Unix seconds (an int64: a string), rounded down as
    the server's interpreter fixes it; dex's ISO `firingTime` and `conditionIndex` stay."""
    return {"conditionId": t["conditionId"], "firingUnixTimestampSeconds": _unix_seconds(t["firingTime"]),
            "status": f"INTERNAL_TIMER_STATUS_{t['status']}", "conditionIndex": t["conditionIndex"],
            "firingTime": t["firingTime"]}
