"""A SubFlow child's end, written into its parent's wait: the state change that lets the
parent's wait re-evaluate (Dex's SubFlow completion signal).

`flows.close` calls `report_to_parent` in the transaction that closes a SubFlow (a flow with a
parent: the close's statement says so, `ClosedFlow.has_parent`): a child whose
parent step still waits on it (the parent's Wait names the child's flow id and run id — or an
earlier run of the child's continue-as-new chain, or the first of its flow retries — and has no
result for it yet) gets its result recorded in that Wait, and the parent step becomes due now
(on the parent's clock), so the next scheduler pass that drives the parent evaluates it (`Engine.claim` ->
`waiting.wake_step`). A parent that has moved on (an any_of another condition won, a closed
parent) is left as it is: the child's end changes nothing there.
"""

from __future__ import annotations

import json
from typing import Any

from dexcli.engine.wait_kinds import SUBFLOW
from dexcli.store import ARCHIVE_SEPARATOR, FlowRecord, FlowState, StepState, Tx


def result_of(flow: FlowRecord) -> dict[str, Any]:
    """A flow's result as a SubFlow condition holds it: status, the completions of a completed
    run, the error (a canceled or terminated run's reason is dex's note, not the result's, as
    the client's FlowResult has it). A running flow: its status only."""
    quiet = flow.status in (FlowState.CANCELED, FlowState.TERMINATED) or flow.is_running
    return {"status": flow.status.value,
            "completions": json.loads(flow.completions) if flow.status is FlowState.COMPLETED else [],
            "errorType": flow.error_type, "errorMessage": None if quiet else flow.error_message}


def _same_chain(tx: Tx, child: FlowRecord, run_id: str | None) -> bool:
    """Whether the run a parent's Wait names is `child`'s, or an earlier run of its
    continue-as-new chain (transitions/continuing.py): the chain's last run reports for it."""
    if run_id is None or run_id in (child.run_id, child.chain_first_run_id):
        return run_id is not None
    if child.retry and json.loads(child.retry).get("firstRunId") == run_id:  # a flow retry's run (flow_retry.py)
        return True
    earlier = tx.get_flow(f"{child.flow_id}{ARCHIVE_SEPARATOR}{run_id}")
    return earlier is not None and earlier.status is FlowState.CONTINUED_AS_NEW and \
        earlier.chain_first_run_id == child.chain_first_run_id


def report_to_parent(tx: Tx, flow_id: str, now: float) -> str | None:
    """The flow `flow_id` has just closed (at `now`, its clock): record its result in the wait
    of the parent step that started it, if that step still waits on this run. Returns the
    parent's flow id when it did."""
    child = tx.get_flow(flow_id)
    if child is None or child.parent_flow_id is None or child.parent_step_execution_id is None or child.is_running:
        return None
    parent = tx.get_flow(child.parent_flow_id)
    if parent is None or not parent.is_running:
        return None
    step = tx.get_step(parent.flow_id, child.parent_step_execution_id)
    if step is None or step.status is not StepState.WAITING or step.wait is None:
        return None
    wait = json.loads(step.wait)
    cond = next((c for c in wait["conditions"] if c["kind"] == SUBFLOW and c.get("flowId") == child.flow_id
                 and _same_chain(tx, child, c.get("runId"))), None)
    if cond is None or cond.get("result") is not None:
        return None
    cond["result"] = result_of(child)
    parent_now = now - child.clock_offset + parent.clock_offset
    tx.set_wait(parent.flow_id, step.step_execution_id, json.dumps(wait), parent_now)  # due: evaluated next pass
    tx.add_event(parent.flow_id, parent_now, "SubFlowCompleted", {
        "stepExecutionId": step.step_execution_id, "subFlowIndex": cond["subFlowIndex"],
        "subFlowId": child.flow_id, "runId": child.run_id, "flowStatus": child.status.value})
    return parent.flow_id
