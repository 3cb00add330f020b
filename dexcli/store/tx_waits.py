"""The statements of waits, channel messages and step cancellation (mixed into `Tx`).

A step whose wait_for returned moves RUNNING -> WAITING (fenced like every write of an
attempt); once its wait is ready it moves WAITING -> QUEUED for its execute method, whose
attempts count from the wait_for method's last (`method_base`). Channel messages are rows
until a wait consumes them (then they are deleted: their values live on in the consuming
step's `condition_results`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from dexcli.store.attempt_rows import CANCEL_ATTEMPTS
from dexcli.store.indexed import step_open
from dexcli.store.records import STEP_COLUMNS, StepRecord, db_of, json_value, step_record

_FENCE = "flow_id = ? AND step_execution_id = ? AND lease_owner = ? AND attempt = ? AND status = 'RUNNING'"


class WaitStatements:
    c: sqlite3.Connection

    def wait_step(self, flow_id: str, seid: str, owner: str | None, attempt: int, wait: str, now: float,
                  next_at: float | None, locals_json: str | None) -> bool:
        """A wait_for attempt returned its Wait: the step waits (no owner). Fenced."""
        cur = self.c.execute(
            "UPDATE steps SET status = 'WAITING', lease_owner = NULL, wait = ?, wait_started = ?, "
            "next_attempt_at = ?, locals = COALESCE(?, locals) WHERE " + _FENCE,
            (wait, now, next_at, locals_json, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def waiting_steps(self, flow_id: str) -> list[StepRecord]:
        rows = self.c.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? AND status = 'WAITING' "
                              "ORDER BY seq", (flow_id,)).fetchall()
        return [step_record(r, db_of(self.c)) for r in rows]

    def set_wait(self, flow_id: str, seid: str, wait: str, next_at: float | None) -> None:
        self.c.execute("UPDATE steps SET wait = ?, next_attempt_at = ? WHERE flow_id = ? AND step_execution_id = ? "
                       "AND status = 'WAITING'", (wait, next_at, flow_id, seid))

    def ready_step(self, step: StepRecord, condition_results: str, now: float, total_deadline: float,
                   wait_for_failed: bool = False, recovery_error: str | None = None) -> bool:
        """The wait is over (or wait_for failed and the policy proceeds): the execute method is
        queued, its attempts counted from here and its TotalDuration from now. A
        `recovery_error` (the failed wait_for's) replaces the step's."""
        cur = self.c.execute(
            "UPDATE steps SET status = 'QUEUED', method = 'EXECUTE', method_base = attempt, "
            "condition_results = ?, wait_ended = ?, scheduled_at = ?, first_attempt_at = NULL, "
            "next_attempt_at = ?, total_deadline = ?, lease_owner = NULL, wait_for_failed = ?, "
            "recovery_error = COALESCE(?, recovery_error) "
            "WHERE flow_id = ? AND step_execution_id = ? AND status = ? AND attempt = ?",
            (condition_results, now, now, now, total_deadline, int(wait_for_failed), recovery_error,
             step.flow_id, step.step_execution_id, step.status.value, step.attempt))
        return bool(cur.rowcount == 1)

    def set_locals(self, flow_id: str, seid: str, locals_json: str) -> None:
        self.c.execute("UPDATE steps SET locals = ? WHERE flow_id = ? AND step_execution_id = ?",
                       (locals_json, flow_id, seid))

    # --- channel messages -----------------------------------------------------------------
    def insert_message(self, message_id: str, flow_id: str, queue: str, value: str, now: float, source: str) -> None:
        self.c.execute("INSERT INTO channel_messages (message_id, flow_id, channel, value, published_at, source) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (message_id, flow_id, queue, value, now, source))

    def queue_counts(self, flow_id: str) -> dict[str, int]:
        rows = self.c.execute("SELECT channel, COUNT(*) FROM channel_messages WHERE flow_id = ? GROUP BY channel",
                              (flow_id,)).fetchall()
        return {q: int(n) for q, n in rows}

    def take_messages(self, flow_id: str, queue: str, n: int) -> list[tuple[str, str]]:
        """Consume the first `n` messages of a queue: (message id, value JSON), FIFO."""
        if n <= 0:
            return []
        rows = self.c.execute("SELECT seq, message_id, value FROM channel_messages WHERE flow_id = ? AND channel = ? "
                              "ORDER BY seq LIMIT ?", (flow_id, queue, n)).fetchall()
        self.c.executemany("DELETE FROM channel_messages WHERE seq = ?", [(r[0],) for r in rows])
        return [(r[1], r[2]) for r in rows]

    def pending_messages(self, flow_id: str, queue: str | None = None) -> list[tuple[str, str, str]]:
        """(queue, message id, value JSON) of the flow's pending messages, FIFO per queue."""
        sql = "SELECT channel, message_id, value FROM channel_messages WHERE flow_id = ?"
        args: tuple[Any, ...] = (flow_id,)
        if queue is not None:
            sql, args = sql + " AND channel = ?", (flow_id, queue)
        rows = self.c.execute(sql + " ORDER BY seq", args).fetchall()
        for _queue, mid, value in rows:  # the views decode them: a damaged one is named here
            json_value(value, db_of(self.c), "channel_messages", f"{flow_id!r} {mid!r}")
        return [(r[0], r[1], r[2]) for r in rows]

    def delete_message(self, flow_id: str, message_id: str) -> bool:
        cur = self.c.execute("DELETE FROM channel_messages WHERE flow_id = ? AND message_id = ?", (flow_id, message_id))
        return bool(cur.rowcount == 1)

    # --- cancellation ---------------------------------------------------------------------
    def cancel_steps(self, flow_id: str, seids: list[str], now: float) -> list[StepRecord]:
        """Cancel these open step executions (their running attempts end CANCELED); returns them as they were."""
        found = []
        for seid in seids:
            row = self.c.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? AND step_execution_id = ? "
                                 f"AND {step_open('status')}", (flow_id, seid)).fetchone()
            if row is None:
                continue
            step = step_record(row, db_of(self.c))
            self.c.execute(CANCEL_ATTEMPTS + " AND step_execution_id = ?", (now, flow_id, seid))
            self.c.execute("UPDATE steps SET status = 'CANCELED', end_time = ?, lease_owner = NULL "
                           "WHERE flow_id = ? AND step_execution_id = ?", (now, flow_id, seid))
            found.append(step)
        return found

    def open_steps(self, flow_id: str) -> list[StepRecord]:
        rows = self.c.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? "
                              f"AND {step_open('status')} ORDER BY seq",
                              (flow_id,)).fetchall()
        return [step_record(r, db_of(self.c)) for r in rows]
