"""Everything about one flow, read from the database, in the stable JSON shape of
`dex inspect --json` (camelCase keys like dexcli; times ISO-8601 UTC).

The live view, `dex watch` and `dex inspect` all render from this, so anything shown live
can be shown again later.
"""

from __future__ import annotations

import json
from typing import Any

from dexcli.engine import retry_policy
from dexcli.engine.attribute_projections import projections
from dexcli.engine.deadlines import earliest_deadline, iso, total_left
from dexcli.engine.wait_kinds import SUBFLOW, TIMER
from dexcli.sdk.errors import FlowNotFoundError
from dexcli.store import (
    ARCHIVE_SEPARATOR,
    AttemptRecord,
    FlowRecord,
    HistoryRecord,
    Method,
    StepRecord,
    StepState,
    Store,
    StreamRecord,
    timeout_time,
)
from dexcli.store.owners import owner_alive


def _j(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def flow_duration(flow: FlowRecord) -> float | None:
    """How long a closed flow ran, on its own clock (None while it runs): the one figure every
    view of it shows (rounded to the millisecond, as its times are)."""
    return None if flow.close_time is None else round(flow.close_time - flow.start_time, 3)


FLOW_STATUS_CODES = {"RUNNING": 1, "COMPLETED": 2, "FAILED": 3, "TERMINATED": 5, "CANCELED": 6, "CONTINUED_AS_NEW": 7}
"""The server's FlowStatus numbers (protos/dex.proto), the Dex CLI's `flowStatusCode`."""


FLOW_CONFIG_DEFAULTS = {"stepDurability": "STEP_DURABILITY_SYNC"}
"""What a run runs with where its FlowConfig sets nothing (every method SYNC, no continue-as-new
threshold); the server's defaults are ASYNC and a threshold of 100. `state.flowConfig` is the
run's FlowConfig (dexcli.engine.flow_config) over these."""


def flow_summary(flow: FlowRecord) -> dict[str, Any]:
    return {
        "flowId": flow.flow_id,
        "runId": flow.run_id,
        "firstRunId": flow.chain_first_run_id,  # the first run of its continue-as-new chain
        "flowType": flow.flow_type,
        "flowStatus": flow.status.value,
        "flowStatusCode": FLOW_STATUS_CODES[flow.status.value],
        "startTime": iso(flow.start_time),
        "closeTime": iso(flow.close_time),
        "durationSeconds": flow_duration(flow),
        "errorType": flow.error_type,
        "errorMessage": flow.error_message,
        "completions": _j(flow.completions) or [],
        **start_options(flow),
        **({"parentFlowId": flow.parent_flow_id, "parentStepExecutionId": flow.parent_step_execution_id}
           if flow.parent_flow_id else {}),
    }


def start_options(flow: FlowRecord) -> dict[str, Any]:
    """The start options the run was given (only those given): timeout, start delay, id reuse."""
    out: dict[str, Any] = {}
    if flow.timeout:
        out.update(timeout=flow.timeout, timeoutPolicy=flow.timeout_policy,
                   timeoutTime=iso(timeout_time(flow.start_time, flow.timeout, flow.start_delay)),
                   timeoutFired=flow.timeout_at is None)
    if flow.start_delay:
        out["startDelay"] = flow.start_delay
    if flow.id_reuse_policy not in (None, "DEFAULT"):
        out["idReusePolicy"] = flow.id_reuse_policy
    if flow.request_id:
        out["requestId"] = flow.request_id
    retry = retry_policy.describe(flow)
    if retry is not None:
        out["flowRetry"] = retry  # its retry policy, which run of its retries it is (transitions/flow_retry)
    return out


def _attempts(attempts: list[AttemptRecord]) -> list[dict[str, Any]]:
    """Each method (wait_for, execute) numbers its attempts from 1, as its handlers' context does."""
    seen: dict[str, int] = {}
    out = []
    for a in attempts:
        seen[a.method] = seen.get(a.method, 0) + 1
        out.append(_attempt(a, seen[a.method]))
    return out


def _attempt(a: AttemptRecord, number: int) -> dict[str, Any]:
    return {
        "attempt": number,
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
        "method": a.method,
    }


def _step(s: StepRecord, attempts: list[AttemptRecord], now: float, locks: Locks) -> dict[str, Any]:
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
        "attempt": s.method_attempt,  # within its current method (see `method`)
        "method": s.method.value,
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
        "attempts": _attempts(attempts),
        **locks.of_step(s),
    }
    if s.wait_options is not None:
        out["waitFor"] = _wait_for(s)
    if s.status is StepState.RUNNING:
        out["running"] = _running(s, now)
    if s.status in (StepState.BACKOFF, StepState.QUEUED):
        out["nextAttemptTime"] = iso(s.next_attempt_at)
        out["secondsToNextAttempt"] = round((s.next_attempt_at or now) - now, 3)
        out["secondsTotalLeft"] = round(total_left(s, now), 3)
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


def _wait_for(s: StepRecord) -> dict[str, Any]:
    """A step's wait_for: when its wait started and ended, how it ended, what it selected."""
    if s.wait_for_failed:
        outcome = "FAILED"
    elif s.wait_ended is not None:
        outcome = "COMPLETED"
    elif s.status is StepState.WAITING:
        outcome = "WAITING"
    elif s.status in (StepState.CANCELED, StepState.FAILED):
        outcome = s.status.value
    else:
        outcome = "RUNNING"  # the wait_for method runs (or is queued, or backs off)
    assert s.wait_options is not None
    return {"startTime": iso(s.wait_started), "endTime": iso(s.wait_ended), "outcome": outcome,
            "conditionResults": _j(s.condition_results),
            "maxAttempts": json.loads(s.wait_options)["maximumAttempts"]}  # its own retry policy's


def _waiting_condition(wait: dict[str, Any]) -> dict[str, Any]:
    """The persisted Wait with its timers' firing times as ISO times."""
    conditions = [{**c, "firingTime": iso(c["firingTime"])} if c["kind"] == TIMER else dict(c)
                  for c in wait["conditions"]]
    return {**wait, "conditions": conditions}


def _timers(s: StepRecord, wait: dict[str, Any], at: float) -> list[dict[str, Any]]:
    """The wait's timers at `at`: PENDING, FIRED or SKIPPED. Once the wait is over, only the
    timers that fired (or were skipped) before it ended are listed."""
    ended = s.wait_ended
    out = []
    for c in wait["conditions"]:
        if c["kind"] != TIMER:
            continue
        if c["skipped"]:
            status = "SKIPPED"
        elif c["firingTime"] <= (ended if ended is not None else at):
            status = "FIRED"
        elif ended is not None:
            continue
        else:
            status = "PENDING"
        out.append({"conditionId": c["conditionId"], "conditionIndex": c["timerIndex"],
                    "firingTime": iso(c["firingTime"]), "status": status})
    return out


def movement(s: StepRecord) -> dict[str, Any]:
    """The movement that queued a step execution, in the server's StepMovement keys (its
    resolved options are the step's `options`)."""
    return {"stepType": s.step_type, "stepInput": _j(s.input),
            "fromStepExecutionIdInternalOnly": s.from_step_execution_id}


def _active(s: StepRecord, at: float, attempts: list[AttemptRecord]) -> dict[str, Any]:
    wait = _j(s.wait)
    waiting = s.method is Method.WAIT_FOR or s.status is StepState.WAITING
    timers = [] if wait is None else _timers(s, wait, at)
    return {"stepExecutionId": s.step_execution_id, "fromStepExecutionId": s.from_step_execution_id,
            "stepType": s.step_type,
            "phase": "WAITING" if waiting else "ACTIVE",
            "movement": movement(s),
            "waitingCondition": None if wait is None else _waiting_condition(wait),
            "completedConditions": None if wait is None else {"completedTimerConditions": {
                str(t["conditionIndex"]): f"INTERNAL_TIMER_STATUS_{t['status']}" for t in timers
                if t["status"] != "PENDING"}, **_completed_sub_flows(wait)},
            "stepExecutionLocals": [{"key": k, "value": json.loads(v)} for k, v in (_j(s.locals) or {}).items()],
            "timers": timers,
            "lastFailureInfo": last_failure(s, attempts)}


def _completed_sub_flows(wait: dict[str, Any]) -> dict[str, Any]:
    """A wait's ended SubFlows by subFlowIndex, as the server's completedSubFlowResults
    (FlowResult: flowStatus, results, errorType, errorMessage); nothing for a wait without any."""
    subs = [c for c in wait["conditions"] if c["kind"] == SUBFLOW]
    if not subs:
        return {}
    return {"completedSubFlowResults": {
        str(c["subFlowIndex"]): {"flowStatus": f"FLOW_STATUS_{c['result']['status']}",
                                 "results": c["result"]["completions"], "errorType": c["result"]["errorType"],
                                 "errorMessage": c["result"]["errorMessage"]}
        for c in subs if c.get("result") is not None}}


FAILED_OUTCOMES = ("FAILED", "TIMED_OUT", "LOST")


def last_failure(s: StepRecord, attempts: list[AttemptRecord]) -> dict[str, Any] | None:
    """The failure of the attempt before the current one of the step's method, as the server's
    StepMethodFailure (`lastFailureInfo`: a retry is pending or running); None if it did not fail."""
    mine = [a for a in attempts if a.method == s.method.value]
    ended = [a for a in mine if a.outcome.value != "RUNNING"]
    if not ended or ended[-1].outcome.value not in FAILED_OUTCOMES:
        return None
    failed = ended[-1]
    number = mine.index(failed) + 1
    if failed.outcome.value != "FAILED":  # a deadline: the backend's error, no worker error
        return {"backendError": failed.detail or failed.outcome.value, "details": None, "attempt": number}
    return {"backendError": f"{failed.error_type}: {failed.detail}",
            "details": {"detail": failed.detail, "subStatus": "ERROR_SUB_STATUS_WORKER_API_ERROR",
                        "originalWorkerErrorType": failed.error_type,
                        "originalWorkerErrorDetail": failed.detail,
                        "originalWorkerErrorStackTrace": failed.stack_trace},
            "attempt": number}


class Locks:
    """A flow's live attribute locks (key, holder, acquired, expires), read once per snapshot:
    what each step execution holds, and who holds the lock a queued step waits for."""

    def __init__(self, rows: list[tuple[str, str, float, Any]]) -> None:
        self.rows = rows
        self.holders = {key: holder for key, holder, _, _ in rows}

    def of_step(self, s: StepRecord) -> dict[str, Any]:
        """`locksHeld` (the keys its method call holds, backoff included) and `waitingForLock` ({key, holder}
        while it is queued behind a lock; holder None: just released, it is taken next)."""
        seid = s.step_execution_id
        held = [key for key, holder, _, _ in self.rows if holder == seid]
        waiting = None
        if s.lock_wait is not None and s.status is StepState.QUEUED:
            waiting = {"key": s.lock_wait, "holder": self.holders.get(s.lock_wait)}
        return {"locksHeld": held, "waitingForLock": waiting}

    def as_json(self) -> list[dict[str, Any]]:
        """`state.locks`: every live lock; an RPC's (holder `rpc:<name>:<id>`) until it expires."""
        return [{"key": key, "holder": holder, "holderKind": "rpc" if holder.startswith("rpc:") else "step",
                 "acquiredTime": iso(acquired), "expiresTime": iso(expires)}
                for key, holder, acquired, expires in self.rows]


def attribute_values(rows: list[tuple[str, str, str | None, str]]) -> dict[str, Any]:
    """`state.attributes`: {name: value}, an AttributeMap's instances as {name: {instance: value}};
    `state.attributeMaps`: the names that are AttributeMaps (a plain value may be an object too);
    `state.attributeKeys`: [{key, value}] by stored key, the server's KV list."""
    values: dict[str, Any] = {}
    maps: list[str] = []
    stored: list[dict[str, Any]] = []
    for key, name, instance, value in rows:
        stored.append({"key": key, "value": json.loads(value)})
        if instance is None:
            values[name] = stored[-1]["value"]
        else:
            values.setdefault(name, {})[instance] = stored[-1]["value"]
            if name not in maps:
                maps.append(name)
    return {"attributes": values, "attributeMaps": maps, "attributeKeys": stored}


def flow_state(flow: FlowRecord, steps: list[StepRecord], pending: list[tuple[str, str, str]],
               now: float, attribute_rows: list[tuple[str, str, str | None, str]] | None = None,
               locks: Locks | None = None, attempts: dict[str, list[AttemptRecord]] | None = None
               ) -> dict[str, Any]:
    """`state`: the step executions in progress (`queuedSteps`: those of them no attempt has
    started yet), the channel messages no wait has taken yet, the attributes, the live locks
    (each step says which it holds or waits for) and the completions so far. For a closed flow,
    as last known: the step executions its close cancelled, as they were, and the attributes'
    last values."""
    locks = locks or Locks([])
    attempts = attempts or {}
    if flow.is_running:
        open_steps = [s for s in steps if s.status.is_open]
        at = now
    else:
        open_steps = [s for s in steps if s.status is StepState.CANCELED and s.end_time == flow.close_time]
        at = flow.close_time or now
    active = [_active(s, at, attempts.get(s.step_execution_id, [])) for s in open_steps]
    queued = [{**movement(s), "stepExecutionId": s.step_execution_id} for s in open_steps
              if flow.is_running and s.status is StepState.QUEUED and s.attempt == 0]
    messages: dict[str, list[dict[str, Any]]] = {}
    for queue, mid, value in pending:
        messages.setdefault(queue, []).append({"messageId": mid, "value": json.loads(value)})
    completed = [{"completedStepType": c["stepType"], "completedStepExecutionId": c["stepExecutionId"],
                  "completedStepOutput": c["output"]} for c in _j(flow.completions) or []]
    return {"flowConfig": {**FLOW_CONFIG_DEFAULTS, **flow.config}, "activeStepExecutions": active,
            "queuedSteps": queued,
            "pendingChannelMessages": messages, **attribute_values(attribute_rows or []), "locks": locks.as_json(),
            "completedSteps": completed}


def history_event(e: HistoryRecord) -> dict[str, Any]:
    return {"eventId": e.event_id, "eventTime": iso(e.event_time), "type": e.type, **json.loads(e.payload)}


def flow_runs(store: Store, flow_id: str) -> list[dict[str, Any]]:
    """Every run of the flow id (`flow_id` may name an archived one, `<flow_id>$<run_id>`),
    oldest first: each with the run it was made from and how (a time travel, a continue-as-new,
    a flow retry, or an id reuse policy that let it take the id), and which one is the flow's current run."""
    base = flow_id.split(ARCHIVE_SEPARATOR, 1)[0]
    current = store.get_flow(base)
    rows = store.read(lambda tx: tx.archived_runs(base)) + ([current] if current is not None else [])
    out = []
    for r in rows:
        came: str | None = None
        how: str | None = None
        for e in store.history_of(r.flow_id):
            if e.type == "TimeTravelFork":
                came, how = json.loads(e.payload).get("previousRunId"), "timeTravel"
            elif e.type == "FlowStarted" and json.loads(e.payload).get("retryOfRunId"):
                came, how = json.loads(e.payload)["retryOfRunId"], "flowRetry"
            elif e.type == "FlowStarted" and json.loads(e.payload).get("previousRunId"):
                came, how = json.loads(e.payload)["previousRunId"], "idReuse"
            elif e.type == "FlowContinued":
                came, how = json.loads(e.payload).get("previousRunId"), "continueAsNew"
        out.append({"runId": r.run_id, "flowId": r.flow_id, "status": r.status.value, "startTime": iso(r.start_time),
                    "closeTime": iso(r.close_time), "current": r.flow_id == base, "shown": r.flow_id == flow_id,
                    "previousRunId": came, "via": how})
    return out


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
    step_rows = store.steps_of(flow_id)
    pending, attrs, lock_rows, children = store.read(lambda tx: (
        tx.pending_messages(flow_id), tx.attribute_values(flow_id), tx.locks_of(flow_id, now), tx.children_of(flow_id)))
    locks = Locks(lock_rows)
    steps = [_step(s, by_step.get(s.step_execution_id, []), now, locks) for s in step_rows]
    streams: dict[str, list[dict[str, Any]]] = {}
    for m in store.stream_messages(flow_id, limit=100_000):
        streams.setdefault(m.stream, []).append(stream_message(m))
    summary = flow_summary(row)
    summary["flowRef"] = row.flow_ref
    summary["input"] = _j(row.input)
    state = flow_state(row, step_rows, pending, now, attrs, locks, by_step)
    state["attributeStore"] = [p.as_json() for p in projections(store, flow_id)]  # synced attributes
    return {
        "summary": summary,
        "steps": steps,
        "streams": streams,
        "history": [history_event(e) for e in store.history_of(flow_id)],
        "state": state,
        "runs": flow_runs(store, flow_id),
        "now": iso(now),
        "overdue": overdue(steps) if row.is_running else None,  # and no process drives it
        "subFlows": [sub_flow(c) for c in children],  # the children its waits started (SubFlows)
    }


def sub_flow(child: FlowRecord) -> dict[str, Any]:
    """A child flow as its parent's snapshot lists it."""
    return {"flowId": child.flow_id, "runId": child.run_id, "flowType": child.flow_type,
            "flowStatus": child.status.value, "stepExecutionId": child.parent_step_execution_id,
            "startTime": iso(child.start_time), "closeTime": iso(child.close_time)}
