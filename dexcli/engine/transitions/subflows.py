"""A committed Wait's SubFlow conditions: their children started (or reused), in the
transaction that makes the parent step WAITING, so that a crash leaves either both or neither.

Each child is a flow of its own with the generated id `SubFlow:<parentFlowId>-<stepExecutionId>-
<index>`, the parent's flow reference (the loader finds the child's code through it) and clock,
and its parent link (`flows.parent_flow_id`, `parent_step_execution_id`); the parent's Wait
names it back (`flowId`, `runId` of the condition). When that id already has a run, the
SubFlowReusePolicy decides, as a Dex server's SubFlowReuseResolver does (a run started by this
very request always attaches):

    existing run          ATTACH          RESTART_IF_PREVIOUS_EXITS_ABNORMALLY   ALWAYS_RESTART
    running               attach          attach                                 terminated, new run
    completed             its result      its result                             new run
    failed/canceled/...   its result      new run                                new run

A reused run that has ended gives the condition its result at once. A child's own end later
reaches the parent through `subflow_results.report_to_parent`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from dexcli.engine.flow_config import merged
from dexcli.engine.transitions.flows import StartRequest, start
from dexcli.engine.transitions.steps import Closed
from dexcli.engine.transitions.subflow_results import result_of
from dexcli.engine.waits import subflow_conditions
from dexcli.store import FlowRecord, FlowState, StartSettings, Tx

ATTACH, RESTART_IF_ABNORMAL, ALWAYS_RESTART = "ATTACH", "RESTART_IF_PREVIOUS_EXITS_ABNORMALLY", "ALWAYS_RESTART"


def child_flow_id(parent_flow_id: str, seid: str, index: int) -> str:
    """A SubFlow's generated flow id, as a Dex server makes it."""
    return f"SubFlow:{parent_flow_id}-{seid}-{index}"


@dataclass(frozen=True, slots=True)
class ChildStart:
    """One SubFlow condition's start, checked before the database: its subFlowIndex, the start
    (flow id generated; the parent's flow ref and the request id are filled in here) and the
    reuse policy's name."""

    index: int
    request: StartRequest
    reuse: str = RESTART_IF_ABNORMAL


@dataclass(frozen=True, slots=True)
class ChildStarted:
    """What a SubFlow condition's start did: `started` (a new flow), `restarted` (a new run of
    an existing id), `attached` (a running run), `ended` (a run that had ended: its result)."""

    index: int
    flow_id: str
    run_id: str
    how: str
    terminated: Closed | None = None  # the running run ALWAYS_RESTART replaced


def _inherited(settings: StartSettings, parent: FlowRecord) -> StartSettings:
    """A child's FlowConfig: the parent's, with SubFlowOptions.config_override's fields over it
    (the server's rule: the override applies over the inherited parent configuration)."""
    if parent.flow_config is None:
        return settings
    override = json.loads(settings.flow_config) if settings.flow_config else {}
    return dataclasses.replace(settings, flow_config=merged(parent.flow_config, override))


def start_children(tx: Tx, parent: FlowRecord, seid: str, wait: dict[str, Any], children: tuple[ChildStart, ...],
                   now: float) -> list[ChildStarted]:
    """Start (or reuse) the children of the wait `wait` of step `seid`, which is updated in
    place with each child's flow id, run id and (reused and ended) result; SubFlowStarted on
    the parent for each."""
    conds = subflow_conditions(wait)
    out = []
    for child in children:
        cond = conds[child.index]
        request_id = f"{parent.run_id}-{seid}-{child.index}"
        req = dataclasses.replace(child.request, flow_ref=parent.flow_ref, request_id=request_id,
                                  ignore_already_started=False, parent=(parent.flow_id, seid),
                                  settings=_inherited(child.request.settings, parent))
        existing = tx.get_flow(req.flow_id)
        policy = ATTACH if existing is not None and existing.request_id == request_id else child.reuse
        done: ChildStarted
        if existing is not None and (policy == ATTACH or (policy == RESTART_IF_ABNORMAL and (
                existing.is_running or existing.status is FlowState.COMPLETED))):
            done = ChildStarted(child.index, existing.flow_id, existing.run_id,
                                "attached" if existing.is_running else "ended")
            if not existing.is_running:
                cond["result"] = result_of(existing)
        else:
            if existing is not None:
                reuse = "ALLOW_TERMINATE_IF_RUNNING" if policy == ALWAYS_RESTART else "ALLOW_IF_PREVIOUS_FAILED"
                req = dataclasses.replace(req, settings=dataclasses.replace(req.settings, id_reuse_policy=reuse))
            started = start(tx, req, now)
            tx.set_parent(req.flow_id, parent.flow_id, seid, parent.clock_offset)
            done = ChildStarted(child.index, req.flow_id, started.run_id,
                                "started" if existing is None else "restarted", started.terminated)
        cond["flowId"], cond["runId"] = done.flow_id, done.run_id
        tx.add_event(parent.flow_id, now, "SubFlowStarted", {
            "stepExecutionId": seid, "subFlowIndex": child.index, "subFlowId": done.flow_id,
            "subFlowType": req.definition.flow_type, "runId": done.run_id, "how": done.how,
            "reusePolicy": child.reuse})
        out.append(done)
    return out
