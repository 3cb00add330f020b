"""A run's FlowConfig changed by a client (`update_config`), and continue-as-new: a running
flow's run ends CONTINUED_AS_NEW and a new run of the same flow id
goes on from where it was, in one transaction (`continue_as_new`); and the FlowConfig
threshold that asks for it (`when_due`). As the server's continueAsNewer.go and
ContinueAsNewCounter:

- **What carries over** (the server's ContinueAsNewDump): the step executions still open —
  queued ones (the dump's steps to start) and those waiting, backing off or running (steps
  to resume), each with its input, wait, completed conditions, locals, attempts and locks; the
  pending channel messages; the attributes (and their search index); the outputs collected so
  far (a graceful completion's request too); the step execution numbering (the new run numbers
  on: `B-4` follows `B-3`); the flow timeout (one time on the flow, as the server's timeout is
  a carried active step); the clock offset. Streams stay with the flow id (a Stream is keyed
  by flow id, not by run).
- **What does not**: the run's history — the new run's starts again at event 1 with
  `FlowContinued` (the Dex CLI's `FlowStartedOrContinued` with `continuedStart`) — and its
  closed step executions, which stay with the old run.
- **The old run** is archived as `<flow_id>$<run_id>`, as a run an id reuse replaced
  (`Tx.archive_run(carry=True)`): status CONTINUED_AS_NEW, its history ending in FlowClosed
  with `continuedToRunId`, a copy of its attributes as they were.
- **Threshold** (`continue_as_new_threshold`, 0: off): the run continues as new once it has
  that many tracked events (`TRACKED`) — each method of a step execution that ended (the server
  counts 2 for a step with a wait_for, 1 without), each RPC that committed effects, each skipped
  timer and FlowConfig update. It is checked in the transaction that records a step's result,
  an RPC, a skip or an update, so the count and the rollover commit together.
- **Page size** (`continue_as_new_page_size_bytes`, 0: 1 MiB): the server reads the old run's
  state into the new one in pages of that size; dex moves it in place, in one transaction, and
  FlowContinued records its size and the pages it would have taken.
- **Running attempts.** The server waits for in-flight methods to drain before it rolls over;
  dex rolls over at once and the running attempt's step carries over with its lease, so its
  result is committed, once, in the new run (it is never run again for the rollover).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from dexcli.engine.flow_config import merged, page_size, threshold
from dexcli.engine.transitions.flows import check_current_run
from dexcli.sdk.errors import FlowNotActiveOrNotFoundError
from dexcli.store import FlowRecord, StepRecord, StepState, Tx

TRACKED = ("StepWaitForCompleted", "StepWaitForFailed", "StepExecuteCompleted", "StepExecuteFailed", "StepCanceled",
           "RpcExecutionCompleted", "TimerSkipped", "FlowConfigUpdated", "SubFlowCompleted")
"""The events the threshold counts, as the server's ContinueAsNewCounter counts: each method of a
step execution that ended (2 for a step with a wait_for), and the signals it received — an RPC's
effects, a skipped timer, a FlowConfig update, a SubFlow's end. A read-only RPC commits nothing
and counts nothing (the server serves it as a query)."""


@dataclass(frozen=True, slots=True)
class Continued:
    """A run rolled over: the flow id's new run, the one it ended and where that is kept."""

    flow_id: str
    run_id: str
    previous_run_id: str
    archived_as: str
    carried: tuple[str, ...]  # the step executions the new run goes on with
    reason: str


def continue_as_new(tx: Tx, flow_id: str, now: float, reason: str, run_id: str | None = None) -> Continued:
    """End the flow's run CONTINUED_AS_NEW and go on with a new run of the same flow id (see the
    module's docstring for what carries). FlowNotActiveOrNotFoundError unless it is running;
    RunNotCurrentError if `run_id` is given and is not its current run (checked first)."""
    flow = tx.get_flow(flow_id)
    if flow is not None:
        check_current_run(flow, run_id, "only the current run can continue as new")
    if flow is None or not flow.is_running:
        state = "is not found" if flow is None else f"is {flow.status.value}"
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} {state}: only a running flow can continue as new")
    return _roll_over(tx, flow, now, reason)


def update_config(tx: Tx, flow_id: str, fields: dict[str, Any], now: float) -> str | None:
    """Client.update_flow_config: the fields set replace the running flow's (the server's
    UpdateByAPI), recorded as FlowConfigUpdated; returns the run's config as stored.
    FlowNotActiveOrNotFoundError unless the flow is running. The update is a tracked event: a
    threshold it lowers to what the run has reached rolls the run over at once."""
    flow = tx.get_flow(flow_id)
    if flow is None or not flow.is_running:
        state = "is not found" if flow is None else f"is {flow.status.value}"
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} {state}: only a running flow's config can change")
    config = merged(flow.flow_config, fields)
    tx.set_flow_config(flow_id, config)
    tx.add_event(flow_id, now, "FlowConfigUpdated", {"update": fields, "flowConfig": json.loads(config or "{}")})
    when_due(tx, flow_id, now)  # an update counts toward the threshold, and may lower it
    return config


def when_due(tx: Tx, flow_id: str, now: float) -> Continued | None:
    """Continue the run as new if its FlowConfig threshold is met (nothing when unset or not
    yet, or when the flow is no longer running)."""
    flow = tx.get_flow(flow_id)
    if flow is None or not flow.is_running or flow.flow_config is None:
        return None
    limit = threshold(flow.config)
    if not limit or tx.run_event_count(flow_id, TRACKED) < limit:
        return None
    return _roll_over(tx, flow, now, f"continue_as_new_threshold {limit} reached")


def _roll_over(tx: Tx, flow: FlowRecord, now: float, reason: str) -> Continued:
    flow_id, run_id = flow.flow_id, str(uuid.uuid4())
    open_steps = tx.open_steps(flow_id)
    numbers = tx.step_numbers_of(flow_id)
    tx.add_event(flow_id, now, "FlowClosed", {
        "flowStatus": "CONTINUED_AS_NEW", "errorType": None, "errorMessage": None, "results": [],
        "continuedToRunId": run_id, "reason": reason})
    archived = tx.archive_run(flow_id, flow.run_id, carry=True)
    tx.end_continued_run(archived, now)
    tx.begin_continued_run(flow_id, run_id, flow.chain_first_run_id, json.dumps(numbers), now)
    to_start = [s for s in open_steps if s.status is StepState.QUEUED and s.attempt == 0]
    to_resume = [s for s in open_steps if s not in to_start]
    carried = {
        "stepsToStart": [_step(s) for s in to_start], "stepsToResume": [_step(s) for s in to_resume],
        "pendingChannelMessages": tx.queue_counts(flow_id),
        "attributes": {key: json.loads(value) for key, _, _, value in tx.attribute_values(flow_id)},
        "completedSteps": json.loads(flow.completions)}
    size, page = len(json.dumps(carried)), page_size(flow.config)
    tx.add_event(flow_id, now, "FlowContinued", {
        "flowType": flow.flow_type, "runId": run_id, "previousRunId": flow.run_id,
        "firstRunId": flow.chain_first_run_id, "archivedAs": archived, "reason": reason, **carried,
        # what the server would have paged through (continue_as_new_page_size_bytes); dex carries it in place
        "carriedBytes": size, "pageSizeBytes": page, "pages": max(1, -(-size // page))})
    return Continued(flow_id, run_id, flow.run_id, archived, tuple(s.step_execution_id for s in open_steps), reason)


def _step(s: StepRecord) -> dict[str, Any]:
    return {"stepExecutionId": s.step_execution_id, "stepType": s.step_type, "status": s.status.value,
            "fromStepExecutionId": s.from_step_execution_id}
