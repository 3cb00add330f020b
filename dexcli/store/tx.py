"""The statements of one write transaction (`with store.tx() as tx:`).

Every write that acts for a running attempt is fenced: its WHERE names the lease owner, the
attempt number and the RUNNING status, and the method returns False when the row no longer
matches (the attempt was taken over, or the flow closed). The caller then writes nothing more.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter, is_, itemgetter
from typing import Any

from dexcli.store.attempt_rows import CANCEL_ATTEMPTS, END_ATTEMPT
from dexcli.store.connection import scalar
from dexcli.store.errors import StoreError
from dexcli.store.indexed import STEPS_DUE, due_first, foreign_running, step_open
from dexcli.store.records import (
    FLOW_COLUMNS,
    STEP_COLUMNS,
    AttemptOutcome,
    ClosedFlow,
    FlowProgress,
    FlowRecord,
    FlowState,
    Runnable,
    StepRecord,
    db_of,
    flow_progress,
    flow_record,
    json_value,
    step_record,
    stored_state,
)
from dexcli.store.tx_attributes import AttributeStatements
from dexcli.store.tx_runs import RunStatements
from dexcli.store.tx_waits import WaitStatements

_RUNNING = FlowState.RUNNING.value
_FENCE = "flow_id = ? AND step_execution_id = ? AND lease_owner = ? AND attempt = ? AND status = 'RUNNING'"
# A new step's row names only what a step can have at its creation; what it gains later
# (heartbeats, its decision, its wait, locals...) starts at the table's defaults. Binding those
# as NULL/False would cost more than the rest of the INSERT: each None or bool parameter goes
# through sqlite3's adaptation lookup (~0.35 µs apiece, 13 of them per step).
LATER_STEP_FIELDS = ("last_heartbeat_time", "heartbeat_value", "has_heartbeat_value", "decision", "end_time",
                 "method_base", "wait", "wait_started", "wait_ended", "condition_results", "wait_for_failed",
                 "locals", "lock_wait", "heartbeats", "stream_writes")
_LATER_VALUES = attrgetter(*LATER_STEP_FIELDS)
_LATER_DEFAULTS = (None, None, False, None, None, 0, None, None, None, None, False, None, None, 0, 0)
_NEW_STEP_FIELDS = tuple(f for f in STEP_COLUMNS.split(", ") if f not in LATER_STEP_FIELDS)
_NEW_STEP_VALUES = attrgetter(*_NEW_STEP_FIELDS)  # not astuple: it deep-copies
_PLAIN_NEW_FIELDS = tuple(f for f in _NEW_STEP_FIELDS if f not in ("status", "method"))  # (those two: enums)
_PLAIN_NEW_VALUES = attrgetter(*_PLAIN_NEW_FIELDS)
_NO_VALUES = (None,) * len(_PLAIN_NEW_FIELDS)
_STEP_INSERTS: dict[tuple[bool, ...], tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]] = {}  # by shape
# An event keyed after its flow's last in one statement (the flow's number, then its last
# event's key: the end of its range), bound (time, type, payload, flow id). VALUES with a
# subquery, not INSERT … SELECT: a SELECT that reads the table it inserts into goes through a
# temporary B-tree (~5 us a statement). A flow that is not there makes the key a text, which
# the rowid refuses (datatype mismatch), so no event is written without its flow.
_ADD_EVENT = ("INSERT INTO history (seq, flow_id, event_time, type, payload) VALUES (COALESCE((SELECT "
              "COALESCE((SELECT MAX(h.seq) FROM history h WHERE h.seq > f.num << 24 AND h.seq < (f.num + 1) << 24), "
              "f.num << 24) + 1 FROM flows f WHERE f.flow_id = ?4), 'no flow'), ?4, ?1, ?2, ?3)")
_INSERT_FLOW = ("INSERT INTO flows (flow_id, run_id, flow_type, flow_ref, status, input, request_id, start_time, num) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(flow_id) DO NOTHING")
_APPEND_EVENT = "INSERT INTO history (seq, flow_id, event_time, type, payload) VALUES (?, ?, ?, ?, ?)"
_COMPACT = json.JSONEncoder(separators=(",", ":"))  # one encoder: json.dumps builds one per call with separators


def _compact_encoder() -> Callable[[Any], str]:
    """`_COMPACT.encode`, without the C encoder it builds on every call (~3 µs of ~4 for a
    small payload): one, made once, without its circular-reference check (what dex encodes
    here is its own records and values already made JSON-ready, never circular)."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the pure-Python encoder as it is
        return _COMPACT.encode
    iterencode = make(None, _COMPACT.default, json.encoder.encode_basestring_ascii, None, ":", ",",
                      False, False, True)

    def encode(value: Any) -> str:
        try:
            return "".join(iterencode(value, 0))
        except RecursionError:  # a circular value after all: the full encoder's own error for it
            return _COMPACT.encode(value)

    return encode


_encode = _compact_encoder()
# A str as `_encode` writes it (a JSON string, non-ASCII escaped): for the hot texts built as
# f-strings, ~5x cheaper than encoding a dict of them and splicing it.
json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


def json_object(*parts: dict[str, Any] | tuple[str, str]) -> str:
    """The JSON text of one object from its parts in order: dicts (encoded) and (key, JSON text)
    pairs whose values are already encoded (spliced as they are, not decoded and re-encoded)."""
    pieces = []
    for part in parts:
        if isinstance(part, tuple):
            key = part[0]  # our own names: a plain identifier needs no escaping
            pieces.append(f'"{key}":{part[1]}' if key.isidentifier() and key.isascii() else
                          f"{_encode(key)}:{part[1]}")
        elif part:
            pieces.append(_encode(part)[1:-1])
    return "{" + ",".join(pieces) + "}"


_PROGRESS = "f.status, f.run_id, f.graceful, f.completions, f.flow_config, f.step_numbers"
_FLOW_PROGRESS = f"SELECT {_PROGRESS} FROM flows f WHERE f.flow_id = ?"
_FLOW_NUMBERING = (f"SELECT {_PROGRESS}, COUNT(s.flow_id), TOTAL(s.step_type = ?) FROM flows f "
                   "LEFT JOIN steps s ON s.flow_id = f.flow_id WHERE f.flow_id = ?")


def _earlier_numbers(step_numbers: str | None, step_type: str) -> tuple[int, int]:
    """(step executions of `step_type`, of all types) the earlier runs of a continue-as-new
    chain numbered (FlowRecord.step_numbers): the new run numbers on from them, as the server
    carries its step execution counter."""
    if not step_numbers:
        return 0, 0
    counts = json.loads(step_numbers)
    return int(counts.get(step_type, 0)), int(counts.get("", 0))


def _new_step_row(step: StepRecord) -> tuple[str, tuple[Any, ...]]:
    """A new step's INSERT and its parameters (its later fields must still be their defaults):
    the columns it has a value for; those it has none for (None) are left to their default,
    NULL, which costs nothing to bind (a None parameter costs as much as an adapter lookup)."""
    if _LATER_VALUES(step) != _LATER_DEFAULTS:
        raise ValueError(f"step {step.step_execution_id}: a new step has no heartbeat, decision, wait, "
                         "locals or lock wait yet")
    values = _PLAIN_NEW_VALUES(step)
    shape = tuple(map(is_, values, _NO_VALUES))
    insert = _STEP_INSERTS.get(shape)
    if insert is None:
        insert = _STEP_INSERTS[shape] = _step_insert(shape)
    return insert[0], insert[1](values) + (step.status._value_, step.method._value_)  # (.value: a property)


def _step_insert(shape: tuple[bool, ...]) -> tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]:
    """The INSERT of a new step whose plain fields are None where `shape` is True."""
    kept = [i for i, none in enumerate(shape) if not none]
    columns = [_PLAIN_NEW_FIELDS[i] for i in kept] + ["status", "method"]
    pick = itemgetter(*kept)
    return (f"INSERT INTO steps ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})",
            (lambda values: (pick(values),)) if len(kept) == 1 else pick)


def _in(ids: list[str]) -> str:
    return f"({','.join('?' for _ in ids)})"


class Tx(WaitStatements, AttributeStatements, RunStatements):
    """Statements inside one transaction. Only the store hands these out."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.c = conn
        # Stream usage per (flow type, stream), read once and written once per transaction
        # however many messages it appends (`finish` writes it before COMMIT).
        self._usage: dict[tuple[str, str], int] = {}
        self._usage_dirty: set[tuple[str, str]] | None = None  # created by the first append
        # Each flow's last history key this transaction wrote (add_event), or the key before its
        # first event for a flow it inserted: the next event of the flow in it is keyed from
        # that, with no MAX read. Only add_event, archive_run and copy_history write history
        # keys; the last two forget these.
        self._last_event: dict[str, int] | None = None

    def finish(self) -> None:
        """Write what this transaction keeps in memory. The store calls it before COMMIT."""
        for key in self._usage_dirty or ():
            self.c.execute(
                "INSERT INTO stream_usage (flow_type, stream, bytes) VALUES (?, ?, ?) "
                "ON CONFLICT(flow_type, stream) DO UPDATE SET bytes = excluded.bytes",
                (*key, self._usage[key]),
            )
        self._usage_dirty = None

    # --- flows ----------------------------------------------------------------------------
    def insert_flow_if_new(self, flow_id: str, run_id: str, flow_type: str, flow_ref: str | None,
                           input: str | None, request_id: str, start_time: float) -> bool:
        """Insert a RUNNING flow unless its id exists (then nothing is written)."""
        row = self.c.execute(
            "INSERT INTO flows (flow_id, run_id, flow_type, flow_ref, status, input, request_id, start_time, num) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(num), 0) + 1 FROM flows)) "
            "ON CONFLICT(flow_id) DO NOTHING RETURNING num",
            (flow_id, run_id, flow_type, flow_ref, _RUNNING, input, request_id, start_time)).fetchone()
        if row is None:
            return False
        self._no_events(flow_id, row[0])
        return True

    def insert_flows(self, rows: list[tuple[str, str, str, str | None, str | None, str, float]]) -> None:
        """`insert_flow_if_new` for many flows whose ids are free (`taken_flow_ids`), in order:
        one statement, numbered on from the largest number read once (no MAX per row), so the
        first event of each is keyed with no read (`add_events`). A row whose id turned out taken
        raises (nothing of this call stays then only if the caller rolls back: run it in a
        savepoint)."""
        base = scalar(self.c, "SELECT COALESCE(MAX(num), 0) FROM flows")
        cur = self.c.executemany(_INSERT_FLOW, [(f, r, t, ref, _RUNNING, i, q, at, n)
                                                for n, (f, r, t, ref, i, q, at) in enumerate(rows, base + 1)])
        if cur.rowcount != len(rows):
            raise StoreError(f"{len(rows) - cur.rowcount} of {len(rows)} new flow ids were taken")
        if self._last_event is None:
            self._last_event = {}
        self._last_event.update((row[0], n << 24) for n, row in enumerate(rows, base + 1))  # as _no_events

    def taken_flow_ids(self, flow_ids: list[str]) -> set[str]:
        """Which of these flow ids have a flow (one statement, the ids as one JSON parameter)."""
        rows = self.c.execute("SELECT flow_id FROM flows WHERE flow_id IN (SELECT value FROM json_each(?))",
                              (_encode(flow_ids),)).fetchall()
        return {r[0] for r in rows}

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A part of the transaction undone alone if it raises (the rest stays)."""
        self.c.execute("SAVEPOINT part")
        try:
            yield
        except BaseException:
            self.c.execute("ROLLBACK TO part")
            self.c.execute("RELEASE part")
            raise
        self.c.execute("RELEASE part")

    def get_flow(self, flow_id: str) -> FlowRecord | None:
        row = self.c.execute(f"SELECT {FLOW_COLUMNS} FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()
        return None if row is None else flow_record(row, db_of(self.c))

    def flow_progress(self, flow_id: str, step_type: str | None) -> tuple[FlowProgress, int, int] | None:
        """What a step's completion reads of its flow (the columns it uses, not a whole
        `FlowRecord`) and, given `step_type`, how many steps of that type it has and how many in
        all (one statement; (0, 0) without `step_type`)."""
        if step_type is None:
            row = self.c.execute(_FLOW_PROGRESS, (flow_id,)).fetchone()
            return None if row is None else (flow_progress(flow_id, row, db_of(self.c)), 0, 0)
        # one pass over the flow's steps for both counts (two COUNT subqueries read them twice);
        # an aggregate answers one row even with no flow: its columns are NULL then
        row = self.c.execute(_FLOW_NUMBERING, (step_type, flow_id)).fetchone()
        if row is None or row[0] is None:
            return None
        flow = flow_progress(flow_id, row[:-2], db_of(self.c))
        by_type, total = _earlier_numbers(flow.step_numbers, step_type)  # continue-as-new: earlier runs'
        return flow, int(row[-1]) + by_type, int(row[-2]) + total

    def set_flow_outputs(self, flow_id: str, completions: str | None, graceful: bool) -> None:
        """Record collected outputs (when given) and the graceful-completion request."""
        if completions is None:
            self.c.execute("UPDATE flows SET graceful = ? WHERE flow_id = ?", (int(graceful), flow_id))
        else:
            self.c.execute("UPDATE flows SET graceful = ?, completions = ? WHERE flow_id = ?",
                           (int(graceful), completions, flow_id))

    def close_flow(self, flow_id: str, status: FlowState, now: float, error_type: str | None,
                   error_message: str | None, completions: str | None = None, if_idle: bool = False
                   ) -> ClosedFlow | None:
        """Close a running flow; `completions` are set in the same statement when given.
        `if_idle`: only when it has no open step (the count and the close in one statement).
        None when it did not close; else what the row says that the close's followers need."""
        extra, args = ("", ()) if completions is None else (", completions = ?", (completions,))
        idle = f" AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.flow_id = flows.flow_id AND {step_open('s.status')})" \
            if if_idle else ""
        row = self.c.execute(
            f"UPDATE flows SET status = ?, close_time = ?, error_type = ?, error_message = ?{extra} "
            f"WHERE flow_id = ? AND status = 'RUNNING'{idle} RETURNING completions, parent_flow_id IS NOT NULL, "
            "EXISTS (SELECT 1 FROM attribute_snapshots a WHERE a.flow_id = flows.flow_id)",
            (status.value, now, error_type, error_message, *args, flow_id)).fetchone()
        if row is None:
            return None
        if completions is None:  # the stored ones: checked as a read of the row would
            json_value(row[0], db_of(self.c), "flows", repr(flow_id), "completions")
        return ClosedFlow(row[0], bool(row[1]), bool(row[2]))

    # --- steps ----------------------------------------------------------------------------
    def next_step_number(self, flow_id: str, step_type: str) -> tuple[int, int]:
        """(n for `<StepType>-<n>`, seq in the flow)."""
        row = self.c.execute(
            "SELECT COUNT(*), COALESCE(SUM(step_type = ?), 0), (SELECT step_numbers FROM flows WHERE flow_id = ?) "
            "FROM steps WHERE flow_id = ?", (step_type, flow_id, flow_id)).fetchone()
        by_type, total = _earlier_numbers(row[2], step_type)  # continue-as-new: earlier runs'
        return int(row[1]) + by_type + 1, int(row[0]) + total + 1

    def insert_step(self, step: StepRecord) -> None:
        """Insert a new step execution (its later fields must still be their defaults)."""
        self.c.execute(*_new_step_row(step))

    def insert_steps(self, steps: list[StepRecord]) -> None:
        """`insert_step` for many new step executions: one statement for each run of steps
        with the same columns set (most batches: one)."""
        rows = [_new_step_row(step) for step in steps]
        start = 0
        while start < len(rows):
            sql, end = rows[start][0], start + 1
            while end < len(rows) and rows[end][0] is sql:
                end += 1
            if end - start == 1:
                self.c.execute(sql, rows[start][1])
            else:
                self.c.executemany(sql, [values for _, values in rows[start:end]])
            start = end

    def get_step(self, flow_id: str, seid: str) -> StepRecord | None:
        row = self.c.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? AND step_execution_id = ?",
                             (flow_id, seid)).fetchone()
        return None if row is None else step_record(row, db_of(self.c))

    def lease_step(self, step: StepRecord, owner: str, now: float, heartbeat_deadline: float,
                   attempt_deadline: float, total_deadline: float | None = None) -> bool:
        """Start the next attempt of a queued or backing-off step for `owner`, if the step is
        still as `step` saw it (`total_deadline`: its TotalDuration starts now)."""
        cur = self.c.execute(
            "UPDATE steps SET status = 'RUNNING', attempt = ?, lease_owner = ?, attempt_started_at = ?, "
            "first_attempt_at = COALESCE(first_attempt_at, ?), last_heartbeat_time = NULL, heartbeats = 0, "
            "stream_writes = 0, heartbeat_deadline = ?, attempt_deadline = ?, "
            "total_deadline = COALESCE(?, total_deadline), next_attempt_at = NULL "
            "WHERE flow_id = ? AND step_execution_id = ? AND status = ? AND attempt = ?",
            (step.attempt + 1, owner, now, now, heartbeat_deadline, attempt_deadline, total_deadline,
             step.flow_id, step.step_execution_id, step.status.value, step.attempt))
        return bool(cur.rowcount == 1)

    def record_heartbeat(self, flow_id: str, seid: str, owner: str, attempt: int, at: float,
                         heartbeat_deadline: float, checkpoint: tuple[bool, str | None] | None,
                         heartbeats: int = 0, writes: int = 0) -> bool:
        """A running attempt's last heartbeat (and checkpoint, when set or cleared), counting
        `heartbeats` more heartbeats and `writes` more Stream messages. Fenced."""
        if checkpoint is None:
            sql = ("UPDATE steps SET last_heartbeat_time = ?, heartbeat_deadline = ?, heartbeats = heartbeats + ?, "
                   "stream_writes = stream_writes + ? WHERE " + _FENCE)
            args: tuple[Any, ...] = (at, heartbeat_deadline, heartbeats, writes)
        else:
            sql = ("UPDATE steps SET last_heartbeat_time = ?, heartbeat_deadline = ?, heartbeats = heartbeats + ?, "
                   "stream_writes = stream_writes + ?, has_heartbeat_value = ?, heartbeat_value = ? WHERE " + _FENCE)
            args = (at, heartbeat_deadline, heartbeats, writes, int(checkpoint[0]), checkpoint[1])
        return bool(self.c.execute(sql, (*args, flow_id, seid, owner, attempt)).rowcount == 1)

    def complete_step(self, flow_id: str, seid: str, owner: str | None, attempt: int, decision: str,
                      now: float) -> bool:
        cur = self.c.execute("UPDATE steps SET status = 'COMPLETED', decision = ?, end_time = ? WHERE " + _FENCE,
                             (decision, now, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def backoff_step(self, flow_id: str, seid: str, owner: str | None, attempt: int, next_at: float) -> bool:
        cur = self.c.execute("UPDATE steps SET status = 'BACKOFF', next_attempt_at = ? WHERE " + _FENCE,
                             (next_at, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def fail_step(self, flow_id: str, seid: str, owner: str | None, attempt: int, end_time: float) -> bool:
        cur = self.c.execute("UPDATE steps SET status = 'FAILED', end_time = ? WHERE " + _FENCE,
                             (end_time, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def release_step(self, flow_id: str, seid: str, owner: str, attempt: int, now: float) -> bool:
        """Give a running attempt's step back (QUEUED, runnable now, no owner). Fenced."""
        cur = self.c.execute("UPDATE steps SET status = 'QUEUED', next_attempt_at = ?, lease_owner = NULL WHERE "
                             + _FENCE, (now, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def give_back_step(self, flow_id: str, seid: str, owner: str, attempt: int, now: float) -> bool:
        """Undo the lease of an attempt that never began: the step is QUEUED, runnable now, with
        its attempt number back (a running attempt has no row of its own to remove). Fenced."""
        cur = self.c.execute("UPDATE steps SET status = 'QUEUED', attempt = attempt - 1, next_attempt_at = ?, "
                             "lease_owner = NULL, first_attempt_at = CASE WHEN attempt = 1 THEN NULL "
                             "ELSE first_attempt_at END WHERE " + _FENCE, (now, flow_id, seid, owner, attempt))
        return bool(cur.rowcount == 1)

    def interrupted_attempts(self, flow_id: str, seid: str, after: int = 0) -> int:
        """How many attempts numbered above `after` were interrupted (they do not count as tries)."""
        return int(scalar(self.c, "SELECT COUNT(*) FROM ended_attempts WHERE flow_id = ? AND step_execution_id = ? "
                                  "AND outcome = 'INTERRUPTED' AND attempt > ?", (flow_id, seid, after)))

    def active_step_count(self, flow_id: str) -> int:
        return int(scalar(self.c, f"SELECT COUNT(*) FROM steps WHERE flow_id = ? AND {step_open('status')}",
                          (flow_id,)))

    def cancel_open_steps(self, flow_id: str, now: float) -> None:
        self.c.execute(CANCEL_ATTEMPTS, (now, flow_id))
        self.c.execute(f"UPDATE steps SET status = 'CANCELED', end_time = ?, lease_owner = NULL "
                       f"WHERE flow_id = ? AND {step_open('status')}", (now, flow_id))

    def runnable_steps(self, now: float, flow_ids: list[str] | None, limit: int) -> list[Runnable]:
        """Queued, backing-off and waiting steps due by `now` (real time; each flow's stored
        times are on its own clock, real time plus its offset), the earliest due first. Of named
        flows, read through their keys; of every flow (a worker's pass), through steps_open in
        due order (`indexed.due_first`): a pass reads what it takes, not every queued step."""
        if flow_ids == []:
            return []
        cols = ", ".join(f"s.{c}" for c in STEP_COLUMNS.split(", "))
        select = f"SELECT {cols}, f.status, f.run_id, f.flow_type, f.flow_ref, f.clock_offset, f.flow_config"
        if flow_ids is not None:
            sql = (f"{select} FROM steps s JOIN flows f ON f.flow_id = s.flow_id WHERE {STEPS_DUE} "
                   f"AND s.next_attempt_at - f.clock_offset <= ? AND s.flow_id IN {_in(flow_ids)} "
                   "ORDER BY s.next_attempt_at - f.clock_offset LIMIT ?")
            rows = self.c.execute(sql, (now, *flow_ids, limit)).fetchall()
        else:
            rows = []
            for sql in due_first(f"{select}, s.next_attempt_at - f.clock_offset", due_by=True):
                rows += self.c.execute(sql, (now, limit)).fetchall()
            # four runs each in due order: sorted() merges them in about one pass (its runs)
            rows = [r[:-1] for r in sorted(rows, key=itemgetter(-1))[:limit]]
        db = db_of(self.c)
        return [Runnable(step_record(r[:-6], db), stored_state(FlowState, r[-6], db, "flows", repr(r[0]), "status"),
                         r[-5], r[-4], r[-3], float(r[-2]), r[-1]) for r in rows]

    def retrying_steps(self, flow_ids: list[str] | None, limit: int) -> list[tuple[StepRecord, float]]:
        """Steps that run again with no timer firing and no outside event: a retry backing off,
        any queued step but the first step of a flow with a start delay before its first try
        (that one waits on a timer). First due first, each with its flow's clock offset."""
        if flow_ids == []:
            return []
        cols = ", ".join(f"s.{c}" for c in STEP_COLUMNS.split(", "))
        sql = (f"SELECT {cols}, f.clock_offset FROM steps s JOIN flows f ON f.flow_id = s.flow_id "
               f"WHERE {STEPS_DUE} AND (s.status = 'BACKOFF' OR (s.status = 'QUEUED' AND NOT ("
               "s.attempt = 0 AND s.lock_wait IS NULL AND f.start_delay IS NOT NULL "
               "AND s.from_step_execution_id = '__start__')))")
        args: list[Any] = []
        if flow_ids is not None:
            sql += f" AND s.flow_id IN {_in(flow_ids)}"
            args += flow_ids
        sql += " ORDER BY s.next_attempt_at - f.clock_offset LIMIT ?"
        db = db_of(self.c)
        return [(step_record(r[:-1], db), float(r[-1])) for r in self.c.execute(sql, (*args, limit)).fetchall()]

    def leased_to(self, owner: str) -> list[tuple[StepRecord, float]]:
        """The running steps `owner` holds, each with its flow's clock offset."""
        cols = ", ".join(f"s.{c}" for c in STEP_COLUMNS.split(", "))
        rows = self.c.execute(f"SELECT {cols}, f.clock_offset FROM steps s JOIN flows f ON f.flow_id = s.flow_id "
                              "WHERE s.status = 'RUNNING' AND s.lease_owner = ?", (owner,)).fetchall()
        db = db_of(self.c)
        return [(step_record(r[:-1], db), float(r[-1])) for r in rows]

    def expired_foreign_attempts(self, now: float, owner: str, flow_ids: list[str] | None
                                 ) -> list[tuple[StepRecord, float]]:
        """Running steps other owners hold whose first deadline has passed by `now` (real
        time), each with its flow's clock offset."""
        if flow_ids == []:
            return []
        cols = ", ".join(f"s.{c}" for c in STEP_COLUMNS.split(", "))
        cond = " AND MIN(s.heartbeat_deadline, s.attempt_deadline, s.total_deadline) - f.clock_offset <= ?"
        args: list[Any] = [now]
        if flow_ids is not None:
            cond += f" AND s.flow_id IN {_in(flow_ids)}"
            args += flow_ids
        sql = foreign_running(f"SELECT {cols}, f.clock_offset FROM steps s JOIN flows f ON f.flow_id = s.flow_id "
                              "WHERE ", cond)
        args = [owner, *args] * 3
        return [(step_record(r[:-1], db_of(self.c)), float(r[-1])) for r in self.c.execute(sql, args).fetchall()]

    # --- attempts -------------------------------------------------------------------------
    def end_attempt(self, flow_id: str, seid: str, attempt: int, owner: str | None, end_time: float,
                    outcome: AttemptOutcome, error_type: str | None = None, detail: str | None = None,
                    stack_trace: str | None = None) -> None:
        """Record an attempt that ended and does not complete its step (that one stays on the
        step's row): its start, counters and method come from the step's row, so call this
        before the next attempt is leased."""
        self.c.execute(END_ATTEMPT, (attempt, owner, end_time, outcome.value, error_type, detail, stack_trace,
                                      flow_id, seid))

    # --- history --------------------------------------------------------------------------
    def add_events(self, events: list[tuple[str, float, str, str]]) -> None:
        """`add_event` for many (flow id, time, type, encoded payload): at most two statements,
        one for the events keyed after the last this transaction wrote for their flow (a flow
        it inserted), one for the others, keyed by the MAX read (their flows' remembered keys
        are forgotten)."""
        last = self._last_event or {}
        known: list[tuple[int, str, float, str, str]] = []
        rest: list[tuple[float, str, str, str]] = []
        for flow_id, now, type_, text in events:
            seq = last.get(flow_id)
            if seq is None:
                rest.append((now, type_, text, flow_id))
            else:
                known.append((seq + 1, flow_id, now, type_, text))
                last[flow_id] = seq + 1
        if known:
            self.c.execute(_APPEND_EVENT, known[0]) if len(known) == 1 else self.c.executemany(_APPEND_EVENT, known)
        if not rest:
            return
        if last:
            for _, _, _, flow_id in rest:
                last.pop(flow_id, None)
        try:
            self.c.execute(_ADD_EVENT, rest[0]) if len(rest) == 1 else self.c.executemany(_ADD_EVENT, rest)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"of {len(rest)} events, one has no flow to go to") from exc

    def _no_events(self, flow_id: str, num: int) -> None:
        """`flow_id` is a new row numbered `num`: its history's range is empty (a number is
        never given twice: MAX + 1, and an archived run's history moves with its new number)."""
        if self._last_event is None:
            self._last_event = {}
        self._last_event[flow_id] = num << 24

    def add_event(self, flow_id: str, now: float, type_: str, payload: dict[str, Any] | str) -> None:
        """Append a history event, numbered after the flow's last; `payload` is a dict, or an
        object already encoded (see json_object)."""
        text = payload if isinstance(payload, str) else _encode(payload)
        last = self._last_event
        if last is not None and flow_id in last:  # an event after one this transaction added
            seq = last[flow_id] + 1
            self.c.execute(_APPEND_EVENT, (seq, flow_id, now, type_, text))
            last[flow_id] = seq
            return
        try:
            cur = self.c.execute(_ADD_EVENT, (now, type_, text, flow_id))
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"no flow {flow_id!r} to add a {type_} event to") from exc
        if cur.lastrowid:  # the history table's rowid is its key
            if last is None:
                self._last_event = last = {}
            last[flow_id] = cur.lastrowid

    # --- streams --------------------------------------------------------------------------
    def append_stream(self, flow_type: str, stream: str, flow_id: str, source: str, value: str,
                      now: float, size: int, capacity: int) -> int | None:
        """Insert one message, trimming the oldest of this flow type's stream to make room.

        Returns the resume token, or None when the message can never fit.
        """
        if size > capacity:
            return None
        key = (flow_type, stream)
        used = self._usage.get(key)
        if used is None:
            used = scalar(self.c, "SELECT bytes FROM stream_usage WHERE flow_type = ? AND stream = ?", key) or 0
        if used + size > capacity:
            used -= self._trim(flow_type, stream, used + size - capacity)
        cur = self.c.execute(
            "INSERT INTO stream_messages (flow_type, stream, flow_id, source, value, created_time, size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)", (flow_type, stream, flow_id, source, value, now, size))
        self._usage[key] = used + size
        if self._usage_dirty is None:
            self._usage_dirty = set()
        self._usage_dirty.add(key)
        return int(cur.lastrowid or 0)

    def _trim(self, flow_type: str, stream: str, need: int) -> int:
        """Delete the oldest messages of a stream until `need` bytes are free; returns the bytes freed."""
        freed = 0
        victims: list[int] = []
        for msg_id, size in self.c.execute(
                "SELECT id, size FROM stream_messages WHERE flow_type = ? AND stream = ? ORDER BY id",
                (flow_type, stream)):
            victims.append(msg_id)
            freed += size
            if freed >= need:
                break
        self.c.executemany("DELETE FROM stream_messages WHERE id = ?", [(v,) for v in victims])
        return freed

    # --- kv: small state a flow package owns (dexcli.host) --------------------------------
    def kv_get(self, ns: str, key: str) -> Any:
        text = scalar(self.c, "SELECT value FROM kv WHERE ns = ? AND key = ?", (ns, key))
        return None if text is None else json_value(text, db_of(self.c), "kv", f"{ns!r} {key!r}")

    def kv_put(self, ns: str, key: str, value: Any) -> None:
        self.c.execute("INSERT INTO kv (ns, key, value) VALUES (?, ?, ?) "
                       "ON CONFLICT(ns, key) DO UPDATE SET value = excluded.value", (ns, key, json.dumps(value)))
