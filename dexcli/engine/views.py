"""Everything about one flow, read from the database, in the stable JSON shape of
`dex inspect --json` (camelCase keys like dexcli; times ISO-8601 UTC).

The live view, `dex watch` and `dex inspect` all render from this, so anything shown live
can be shown again later.
"""

from __future__ import annotations

import json
from typing import Any

from dexcli.engine.deadlines import earliest_deadline, iso, owner_alive
from dexcli.sdk.errors import FlowNotFoundError
from dexcli.store import AttemptRecord, FlowRecord, HistoryRecord, StepRecord, StepState, Store, StreamRecord


def _j(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def flow_summary(flow: FlowRecord) -> dict[str, Any]:
    return {
        "flowId": flow.flow_id,
        "runId": flow.run_id,
        "flowType": flow.flow_type,
        "flowStatus": flow.status.value,
        "startTime": iso(flow.start_time),
        "closeTime": iso(flow.close_time),
        "errorType": flow.error_type,
        "errorMessage": flow.error_message,
        "completions": _j(flow.completions) or [],
    }


def _attempt(a: AttemptRecord) -> dict[str, Any]:
    return {
        "attempt": a.attempt,
        "startTime": iso(a.start_time),
        "endTime": iso(a.end_time),
        "outcome": a.outcome.value,
        "errorType": a.error_type,
        "detail": a.detail,
        "owner": a.owner,
        "heartbeats": a.heartbeats,
        "lastHeartbeatTime": iso(a.last_heartbeat),
        "streamWrites": a.stream_writes,
        "stackTrace": a.stack_trace,  # the user code's traceback, innermost frame first
    }


def _step(s: StepRecord, attempts: list[AttemptRecord], now: float) -> dict[str, Any]:
    opts = json.loads(s.options)  # the ResolvedOptions JSON shape (dexcli.sdk.options)
    rec = _j(s.recovery_error)
    out: dict[str, Any] = {
        "stepExecutionId": s.step_execution_id,
        "stepType": s.step_type,
        "fromStepExecutionId": s.from_step_execution_id,
        "status": s.status.value,
        "input": _j(s.input),
        "decision": _j(s.decision),
        "recoveryError": None if rec is None else {"errorType": rec["error_type"], "detail": rec["detail"]},
        "attempt": s.attempt,
        "maxAttempts": opts["maximumAttempts"],
        "scheduledTime": iso(s.scheduled_at),
        "firstAttemptTime": iso(s.first_attempt_at),
        "endTime": iso(s.end_time),
        "lastHeartbeatTime": iso(s.last_heartbeat_time),
        "lastHeartbeatValue": _j(s.heartbeat_value) if s.has_heartbeat_value else None,
        "hasCheckpoint": s.has_heartbeat_value,
        "options": {
            "executeMethodTimeout": opts["methodTimeout"],
            "heartbeatTimeout": opts["heartbeatTimeout"],
            "totalDuration": opts["totalDuration"],
            "maximumAttempts": opts["maximumAttempts"],
            "initialInterval": opts["initialInterval"],
            "backoffCoefficient": opts["backoffCoefficient"],
            "maximumInterval": opts["maximumInterval"],
            "executeFailureStep": opts.get("failureStep"),
        },
        "attempts": [_attempt(a) for a in attempts],
    }
    if s.status is StepState.RUNNING:
        out["running"] = _running(s, now)
    if s.status in (StepState.BACKOFF, StepState.QUEUED):
        out["nextAttemptTime"] = iso(s.next_attempt_at)
        out["secondsToNextAttempt"] = round((s.next_attempt_at or now) - now, 3)
        out["secondsTotalLeft"] = round(s.total_deadline - now, 3)
    return out


OVERDUE_GRACE = 2.0  # a process driving the flow claims what is due within half a second


def overdue(steps: list[dict[str, Any]]) -> dict[str, Any] | None:
    """When no live process holds the flow and something of it is past due: by how long, and
    which step. None while a live process holds one of its steps (it drives the flow)."""
    late: list[tuple[float, str]] = []
    for st in steps:
        r = st.get("running")
        if r is not None:
            if r["ownerAlive"] is True:
                return None
            if r["secondsToTimeout"] < 0:
                late.append((-r["secondsToTimeout"], st["stepExecutionId"]))
        elif st["status"] in ("QUEUED", "BACKOFF") and st["secondsToNextAttempt"] < -OVERDUE_GRACE:
            late.append((-st["secondsToNextAttempt"], st["stepExecutionId"]))
    if not late:
        return None
    seconds, seid = max(late)
    return {"seconds": round(seconds, 3), "stepExecutionId": seid}


def _running(s: StepRecord, now: float) -> dict[str, Any]:
    hb_dl, at_dl, tot_dl = s.heartbeat_deadline, s.attempt_deadline, s.total_deadline
    started = s.attempt_started_at
    assert hb_dl is not None and at_dl is not None and started is not None
    first, kind = earliest_deadline(at_dl, hb_dl, tot_dl)
    return {
            "owner": s.lease_owner,
            "attemptStartTime": iso(started),
            "heartbeatDeadline": iso(hb_dl),
            "attemptDeadline": iso(at_dl),
            "totalDeadline": iso(tot_dl),
            "nextTimeout": kind,
            "nextTimeoutTime": iso(first),
            "secondsToTimeout": round(first - now, 3),
            "secondsSinceHeartbeat": round(now - (s.last_heartbeat_time or started), 3),
            "secondsRunning": round(now - started, 3),
            "secondsHeartbeatLeft": round(hb_dl - now, 3),
            "secondsAttemptLeft": round(at_dl - now, 3),
            "secondsTotalLeft": round(tot_dl - now, 3),
            "ownerAlive": owner_alive(s.lease_owner),
    }


def history_event(e: HistoryRecord) -> dict[str, Any]:
    return {"eventId": e.event_id, "eventTime": iso(e.event_time), "type": e.type, **json.loads(e.payload)}


def stream_message(m: StreamRecord) -> dict[str, Any]:
    return {"value": json.loads(m.value), "source": m.source, "createdTime": iso(m.created_time),
            "resumeToken": str(m.id)}


def inspect_flow(store: Store, flow_id: str, now: float) -> dict[str, Any]:
    row = store.get_flow(flow_id)
    if row is None:
        raise FlowNotFoundError(f"no flow with id {flow_id!r} in {store.path}")
    by_step: dict[str, list[AttemptRecord]] = {}
    for a in store.attempts_of(flow_id):
        by_step.setdefault(a.step_execution_id, []).append(a)
    for v in by_step.values():
        v.sort(key=lambda a: a.attempt)
    steps = [_step(s, by_step.get(s.step_execution_id, []), now) for s in store.steps_of(flow_id)]
    streams: dict[str, list[dict[str, Any]]] = {}
    for m in store.stream_messages(flow_id, limit=100_000):
        streams.setdefault(m.stream, []).append(stream_message(m))
    summary = flow_summary(row)
    summary["flowRef"] = row.flow_ref
    summary["input"] = _j(row.input)
    return {
        "summary": summary,
        "steps": steps,
        "streams": streams,
        "history": [history_event(e) for e in store.history_of(flow_id)],
        "now": iso(now),
        "overdue": overdue(steps) if row.is_running else None,  # and no process drives it
    }
