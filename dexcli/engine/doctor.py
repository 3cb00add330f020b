"""`dex doctor`: check the database's invariants and name every breach.

  - attempts of a step are numbered 1..n with no gap; only the last may be RUNNING, and it is
    RUNNING exactly when the step is; a COMPLETED step has one COMPLETED attempt, its last;
  - no decision applied twice: at most one StepExecuteCompleted per step execution, and every
    step execution other than the start step was created by a recorded decision or failure;
  - counts match history: COMPLETED steps = StepExecuteCompleted events, FAILED steps =
    StepExecuteFailed events, one FlowClosed exactly when the flow is closed;
  - a closed flow has nothing queued or running; a RUNNING flow has something queued,
    running or backing off, unless every branch dead-ended.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from dexcli.store import Store

OPEN = ("QUEUED", "RUNNING", "BACKOFF")


def check_flow(store: Store, flow: dict[str, Any]) -> list[str]:
    fid = flow["flow_id"]
    problems: list[str] = []
    steps = store.steps_of(fid)
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in store.attempts_of(fid):
        attempts.setdefault(a["step_execution_id"], []).append(a)
    history = [dict(e, payload=json.loads(e["payload"])) for e in store.history_of(fid)]
    completed_events = Counter(e["payload"]["stepExecutionId"] for e in history if e["type"] == "StepExecuteCompleted")
    failed_events = Counter(e["payload"]["stepExecutionId"] for e in history if e["type"] == "StepExecuteFailed")
    created: set[str] = set()
    for e in history:
        p = e["payload"]
        if e["type"] == "FlowStarted":
            created.add(p.get("startStepExecutionId", ""))
        elif e["type"] == "StepExecuteCompleted":
            created.update(n["stepExecutionId"] for n in p["decision"].get("next", []))
        elif e["type"] == "StepExecuteFailed" and p.get("recoveryStepExecutionId"):
            created.add(p["recoveryStepExecutionId"])
    for s in steps:
        seid = s["step_execution_id"]
        where = f"{fid} {seid}"
        atts = sorted(attempts.get(seid, []), key=lambda a: a["attempt"])
        nums = [a["attempt"] for a in atts]
        if nums != list(range(1, len(nums) + 1)):
            problems.append(f"{where}: attempts are numbered {nums}, not 1..{len(nums)}")
        if s["attempt"] != len(nums):
            problems.append(f"{where}: step says attempt {s['attempt']} but {len(nums)} attempt records exist")
        running = [a["attempt"] for a in atts if a["outcome"] == "RUNNING"]
        if s["status"] == "RUNNING":
            if running != ([nums[-1]] if nums else []) or not running:
                problems.append(f"{where}: step is RUNNING but its running attempts are {running}")
        elif running:
            problems.append(f"{where}: step is {s['status']} but attempts {running} are still RUNNING")
        done = [a["attempt"] for a in atts if a["outcome"] == "COMPLETED"]
        if s["status"] == "COMPLETED" and (len(done) != 1 or done[0] != nums[-1]):
            problems.append(f"{where}: COMPLETED step has completed attempts {done} of {nums}")
        if s["status"] != "COMPLETED" and done:
            problems.append(f"{where}: {s['status']} step has a COMPLETED attempt {done}")
        if s["status"] == "BACKOFF" and atts and atts[-1]["outcome"] not in ("FAILED", "TIMED_OUT", "LOST"):
            problems.append(f"{where}: BACKOFF step's last attempt is {atts[-1]['outcome']}")
        if completed_events[seid] > 1:
            problems.append(f"{where}: decision applied {completed_events[seid]} times")
        if (s["status"] == "COMPLETED") != (completed_events[seid] == 1):
            problems.append(f"{where}: status {s['status']} but {completed_events[seid]} StepExecuteCompleted events")
        if (s["status"] == "FAILED") != (failed_events[seid] == 1):
            problems.append(f"{where}: status {s['status']} but {failed_events[seid]} StepExecuteFailed events")
        if seid not in created:
            problems.append(f"{where}: no recorded decision or failure created this step execution")
    closes = [e for e in history if e["type"] == "FlowClosed"]
    open_steps = [s["step_execution_id"] for s in steps if s["status"] in OPEN]
    if flow["status"] == "RUNNING":
        if closes:
            problems.append(f"{fid}: RUNNING but history has FlowClosed")
        dead_ends = all(json.loads(s["decision"] or "{}").get("kind") == "deadEnd"
                        for s in steps if s["status"] == "COMPLETED" and not _moved(s))
        if not open_steps and not (steps and dead_ends and not flow["graceful"]):
            problems.append(f"{fid}: RUNNING with nothing queued, running or backing off")
    else:
        if len(closes) != 1:
            problems.append(f"{fid}: {flow['status']} but {len(closes)} FlowClosed events")
        elif closes[0]["payload"]["flowStatus"] != flow["status"]:
            problems.append(f"{fid}: status {flow['status']} but FlowClosed says {closes[0]['payload']['flowStatus']}")
        if open_steps:
            problems.append(f"{fid}: {flow['status']} but steps are still open: {', '.join(open_steps)}")
    return problems


def _moved(step: dict[str, Any]) -> bool:
    return json.loads(step["decision"] or "{}").get("kind") == "goTo"


def check(store: Store, flow_id: str | None = None) -> tuple[list[str], int]:
    flows = [store.get_flow(flow_id)] if flow_id else store.list_flows(limit=10**9)
    problems: list[str] = []
    for f in flows:
        if f is not None:
            problems.extend(check_flow(store, f))
    return problems, len([f for f in flows if f is not None])
