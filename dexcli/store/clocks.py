"""A flow's clock: the statements that move all of a flow's stored times at once.

Each flow keeps its times on its own clock, real time plus `flows.clock_offset` (what
`--time-skip` and `dex time skip` added). `rebase_flow` puts a flow back on real time without
changing when anything of it is due.

A flow's clock runs at most MAX_CLOCK_OFFSET ahead: 1000 years keeps every time it stores, and
each one moved back by `dex time reset`, within what a date can show (years 1 to 9999).
"""

from __future__ import annotations

import json
import math
import sqlite3
from typing import Any

from dexcli.store.errors import StoreError
from dexcli.store.indexed import HISTORY_OF

MAX_CLOCK_OFFSET = 1000 * 365 * 86400.0


class ClockRangeError(StoreError):
    """A skip that is not a finite number of seconds, or that would put a flow's
    clock more than MAX_CLOCK_OFFSET ahead of real time. Nothing was moved."""

    exit_code = 2

# every stored time of a flow, by table (and its history's, found by key)
_TIMES = {
    "flows": ("start_time", "close_time"),
    "steps": ("scheduled_at", "first_attempt_at", "next_attempt_at", "attempt_started_at",
              "last_heartbeat_time", "heartbeat_deadline", "attempt_deadline", "total_deadline",
              "end_time", "wait_started", "wait_ended"),
    "ended_attempts": ("start_time", "end_time", "last_heartbeat"),
    "stream_messages": ("created_time",),
    "channel_messages": ("published_at",),
}


def check_skip(c: sqlite3.Connection, cond: str, args: list[Any], seconds: float) -> None:
    """Refuse (ClockRangeError) a skip by `seconds` of the flows `cond` selects that no clock
    could take (inside the caller's transaction, before it moves anything)."""
    if not math.isfinite(seconds):
        raise ClockRangeError(f"a clock moves forward by a finite number of seconds, not {seconds!r}")
    row = c.execute(f"SELECT flow_id, clock_offset FROM flows WHERE {cond} ORDER BY clock_offset DESC LIMIT 1",
                    args).fetchone()
    if row is not None and float(row[1]) + seconds > MAX_CLOCK_OFFSET:
        raise ClockRangeError(f"flow {row[0]}'s clock would be more than 1000 years ahead of real time; "
                              "nothing was moved")


def rebase_flow(c: sqlite3.Connection, flow_id: str) -> float:
    """Move every time of the flow back by its offset and set the offset to 0 (inside the
    caller's transaction). Returns the old offset (0.0 for an unknown flow)."""
    row = c.execute("SELECT clock_offset FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()
    offset = float(row[0]) if row else 0.0
    if not offset:
        return 0.0
    for table, cols in _TIMES.items():
        sets = ", ".join(f"{col} = {col} - ?" for col in cols)
        c.execute(f"UPDATE {table} SET {sets} WHERE flow_id = ?", (*(offset for _ in cols), flow_id))
    c.execute(f"UPDATE history SET event_time = event_time - ? WHERE {HISTORY_OF}", (offset, flow_id, flow_id))
    waits = c.execute("SELECT step_execution_id, wait FROM steps WHERE flow_id = ? AND wait IS NOT NULL",
                      (flow_id,)).fetchall()
    for seid, text in waits:
        c.execute("UPDATE steps SET wait = ? WHERE flow_id = ? AND step_execution_id = ?",
                  (json.dumps(_shift_timers(json.loads(text), -offset)), flow_id, seid))
    c.execute("UPDATE flows SET clock_offset = 0 WHERE flow_id = ?", (flow_id,))
    return offset


def _shift_timers(value: Any, by: float) -> Any:
    """A persisted Wait with each timer's firingTime moved by `by` seconds."""
    if isinstance(value, dict):
        return {k: (v + by if k == "firingTime" and isinstance(v, int | float) else _shift_timers(v, by))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_shift_timers(v, by) for v in value]
    return value
