"""Every flow of a database at a glance, for `dex top`: how many flows are in each status, and
of the newest running ones what each open step does — from the `dex inspect --json` shape
(engine.views), trimmed to what is in progress. Read-only: one read of the counts and one
snapshot per running flow shown; nothing is written and no flow code runs.
"""

from __future__ import annotations

from typing import Any

from dexcli.engine.deadlines import iso
from dexcli.engine.views import inspect_flow
from dexcli.sdk.errors import FlowNotFoundError
from dexcli.store import FlowRecord, FlowState, Store

OPEN = ("QUEUED", "RUNNING", "WAITING", "BACKOFF")


def running_flow(store: Store, flow: FlowRecord, now: float) -> dict[str, Any] | None:
    """A running flow's summary, its open steps (the inspect shape), the state they read (what
    they wait for, the messages queued), `overdue` (views.overdue: no live process drives it and
    something is past due) and `orphaned` (steps whose attempt's process is gone). None if it
    closed or went since the list was read."""
    try:
        snap = inspect_flow(store, flow.flow_id, now)
    except FlowNotFoundError:
        return None
    if snap["summary"]["flowStatus"] != FlowState.RUNNING.value:
        return None
    steps = [st for st in snap["steps"] if st["status"] in OPEN]
    orphaned = [st["stepExecutionId"] for st in steps if (st.get("running") or {}).get("ownerAlive") is False]
    state = snap["state"]
    return {"summary": snap["summary"], "clockOffset": flow.clock_offset, "now": snap["now"], "steps": steps,
            "state": {"activeStepExecutions": state["activeStepExecutions"],
                      "pendingChannelMessages": state["pendingChannelMessages"]},
            "overdue": snap["overdue"], "orphaned": orphaned}


def overview(store: Store, real_now: float, limit: int) -> dict[str, Any]:
    """`counts` per status (every status, 0 included), `total`, and up to `limit` of the newest
    running flows (`running`: those in trouble — overdue or orphaned — first), with
    `runningNotShown`, how many more are running."""
    counts = store.status_counts()
    flows = []
    for row in store.list_flows(FlowState.RUNNING, None, limit):
        entry = running_flow(store, row, real_now + row.clock_offset)
        if entry is not None:
            flows.append(entry)
    flows.sort(key=lambda f: not (f["overdue"] or f["orphaned"]))  # stable: newest first within each
    by_status = {s.value: counts.get(s, 0) for s in FlowState}
    return {"now": iso(real_now), "total": sum(by_status.values()), "counts": by_status, "running": flows,
            "runningNotShown": max(0, by_status[FlowState.RUNNING.value] - len(flows))}
