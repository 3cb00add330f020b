"""Rows for the store contract tests, written through the store's own API with plain defaults.

Times are small round numbers (the store does not care what clock they come from); every
helper takes the open transaction, so a test can build a whole scene in one `store.tx()`.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

from dexcli.store import FlowRecord, StepRecord, StepState, Store, Tx
from dexcli.store.tx import LATER_STEP_FIELDS

T0 = 1_000.0
OPTIONS = '{"note": "the store keeps options as opaque text"}'


def add_flow(tx: Tx, flow_id: str, *, flow_type: str = "Orders", start_time: float = T0,
             request_id: str | None = None, flow_ref: str | None = "name:orders") -> None:
    assert tx.insert_flow_if_new(flow_id, f"run-{flow_id}", flow_type, flow_ref, '{"n": 1}',
                                 request_id or f"req-{flow_id}", start_time)


def make_step(flow_id: str, seid: str, **changes: Any) -> StepRecord:
    """A QUEUED step execution, runnable from T0, with no attempt yet."""
    step_type = seid.rsplit("-", 1)[0]
    base = StepRecord(
        flow_id=flow_id, step_execution_id=seid, step_type=step_type, seq=1, from_step_execution_id="__start__",
        input="1", options=OPTIONS, status=StepState.QUEUED, attempt=0, scheduled_at=T0, first_attempt_at=None,
        next_attempt_at=T0, lease_owner=None, attempt_started_at=None, last_heartbeat_time=None,
        heartbeat_deadline=None, attempt_deadline=None, total_deadline=T0 + 3600, heartbeat_value=None,
        has_heartbeat_value=False, recovery_error=None, decision=None, end_time=None)
    return dataclasses.replace(base, **changes)


def add_step(tx: Tx, flow_id: str, seid: str, **changes: Any) -> StepRecord:
    """Insert a step; fields only later moves write (a heartbeat, a decision, an end time...)
    are set after the insert, as those moves would have (insert_step refuses them)."""
    later = {k: changes.pop(k) for k in list(changes) if k in LATER_STEP_FIELDS}
    step = make_step(flow_id, seid, **changes)
    tx.insert_step(step)
    if later:
        tx.c.execute(f"UPDATE steps SET {', '.join(f'{k} = ?' for k in later)} "
                     "WHERE flow_id = ? AND step_execution_id = ?", (*later.values(), flow_id, seid))
        step = dataclasses.replace(step, **later)
    return step


def add_running(tx: Tx, flow_id: str, seid: str, owner: str, *, attempt: int = 1, at: float = T0,
                heartbeat_deadline: float | None = None, attempt_deadline: float | None = None,
                **changes: Any) -> StepRecord:
    """A step whose attempt `attempt` runs for `owner` (the step's row holds the running attempt)."""
    step = add_step(tx, flow_id, seid, status=StepState.RUNNING, attempt=attempt, lease_owner=owner,
                    first_attempt_at=at, attempt_started_at=at, next_attempt_at=None,
                    heartbeat_deadline=at + 60 if heartbeat_deadline is None else heartbeat_deadline,
                    attempt_deadline=at + 600 if attempt_deadline is None else attempt_deadline, **changes)
    return step


def flow(store: Store, flow_id: str) -> FlowRecord:
    record = store.get_flow(flow_id)
    assert record is not None, f"no flow {flow_id}"
    return record


def step(store: Store, flow_id: str, seid: str) -> StepRecord:
    record = store.read(lambda tx: tx.get_step(flow_id, seid))
    assert record is not None, f"no step {flow_id}/{seid}"
    return record


def raw(path: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows read with a plain sqlite3 connection of its own (what another process would see)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()
