"""The statements of a flow's start options and runs (mixed into `Tx`): its timeout, start
delay and id reuse policy, the flow timeouts that are due, and archiving a closed run.

A flow id names one run at a time (the flows table's key). When an id reuse policy lets a
new run take the id, the previous run's rows move to the id `<flow_id>$<run_id>` (a flow id
never contains `$`), so its steps, attempts and history stay readable (`dex inspect
'<flow_id>$<run_id>'`). Stream messages stay under the flow id: a Stream instance is keyed by
(flow type, stream, flow id), not by run.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from dexcli.store.indexed import FLOWS_WITH_TIMEOUT, prefix_range, step_open
from dexcli.store.records import (
    FLOW_COLUMNS,
    HISTORY_COLUMNS,
    STEP_COLUMNS,
    FlowRecord,
    HistoryRecord,
    StepRecord,
    db_of,
    flow_record,
    history_record,
    step_record,
)

ARCHIVE_SEPARATOR = "$"


def timeout_time(start_time: float, timeout: float | None, start_delay: float | None) -> float | None:
    """When a run's flow timeout fires: `timeout` after its start delay has passed, as a Dex
    server counts it from when the run's code first runs (flowTimeout.go), not from the start."""
    return start_time + (start_delay or 0.0) + timeout if timeout else None


@dataclass(frozen=True, slots=True)
class StartSettings:
    """A run's start options, as stored (seconds; policies by name)."""

    timeout: float | None = None
    timeout_policy: str | None = None  # FAIL CANCEL HANDLER
    timeout_handler_options: str | None = None  # ResolvedOptions JSON
    start_delay: float | None = None
    id_reuse_policy: str | None = None
    flow_config: str | None = None  # StartFlowOptions.config_override, as FlowRecord.flow_config holds it
    retry_policy: str | None = None  # StartFlowOptions.retry_policy resolved (transitions/flow_retry.py), JSON

    @property
    def is_default(self) -> bool:
        """Nothing to store: no timeout, no delay, the DEFAULT id reuse policy, no FlowConfig, no retry policy."""
        return not (self.timeout or self.start_delay or self.timeout_policy or self.flow_config
                    or self.retry_policy) and \
            self.id_reuse_policy in (None, "DEFAULT")


class RunStatements:
    c: sqlite3.Connection
    _last_event: dict[str, int] | None  # Tx's: each flow's last history key it added

    # --- SubFlows: a child names its parent step execution; it starts on its parent's clock ---
    def set_parent(self, flow_id: str, parent_flow_id: str, parent_seid: str, clock_offset: float) -> None:
        self.c.execute("UPDATE flows SET parent_flow_id = ?, parent_step_execution_id = ?, clock_offset = ? "
                       "WHERE flow_id = ?", (parent_flow_id, parent_seid, clock_offset, flow_id))

    def children_of(self, flow_id: str) -> list[FlowRecord]:
        """The flows a wait of this flow started (their archived runs too), oldest first."""
        rows = self.c.execute(f"SELECT {FLOW_COLUMNS} FROM flows WHERE parent_flow_id = ? ORDER BY num",
                              (flow_id,)).fetchall()
        return [flow_record(r, db_of(self.c)) for r in rows]

    def set_start_settings(self, flow_id: str, settings: StartSettings, start_time: float) -> None:
        """Record a new run's start options; its timeout fires `timeout` after the start delay."""
        s = settings
        timeout_at = timeout_time(start_time, s.timeout, s.start_delay)
        self.c.execute(
            "UPDATE flows SET timeout = ?, timeout_policy = ?, timeout_at = ?, timeout_handler_options = ?, "
            "start_delay = ?, id_reuse_policy = ?, flow_config = ?, retry_policy = ? WHERE flow_id = ?",
            (s.timeout, s.timeout_policy, timeout_at, s.timeout_handler_options, s.start_delay,
             s.id_reuse_policy, s.flow_config, s.retry_policy, flow_id))

    def set_retry(self, flow_id: str, retry: str) -> None:
        """A flow retry's new run: which attempt it is, of which first run (transitions/flow_retry.py)."""
        self.c.execute("UPDATE flows SET retry = ? WHERE flow_id = ?", (retry, flow_id))

    def set_flow_config(self, flow_id: str, config: str | None) -> None:
        """A running flow's FlowConfig (Client.update_flow_config: the merge is the caller's)."""
        self.c.execute("UPDATE flows SET flow_config = ? WHERE flow_id = ?", (config, flow_id))

    def due_flow_timeouts(self, now: float, flow_ids: list[str] | None) -> list[tuple[str, float]]:
        """Running flows whose timeout has come by real time `now`, earliest first, each with
        its clock offset (its timeout is on its own clock)."""
        if flow_ids == []:
            return []
        sql = (f"SELECT f.flow_id, f.clock_offset FROM flows f WHERE {FLOWS_WITH_TIMEOUT} "
               "AND f.timeout_at - f.clock_offset <= ?")
        args: list[Any] = [now]
        if flow_ids is not None:
            sql += f" AND f.flow_id IN ({','.join('?' for _ in flow_ids)})"
            args += flow_ids
        return [(r[0], float(r[1])) for r in self.c.execute(sql + " ORDER BY f.timeout_at", args).fetchall()]

    def take_flow_timeout(self, flow_id: str) -> bool:
        """The timeout of a running flow fires once: clear it. False when it already had."""
        cur = self.c.execute("UPDATE flows SET timeout_at = NULL WHERE flow_id = ? AND status = 'RUNNING' "
                             "AND timeout_at IS NOT NULL", (flow_id,))
        return bool(cur.rowcount == 1)

    def archive_run(self, flow_id: str, run_id: str, carry: bool = False) -> str:
        """Move a closed run's rows to `<flow_id>$<run_id>`; returns that id.

        `carry` (continue-as-new): the run goes on under the flow id as a new run, so only what
        is over moves: its closed step executions and their attempts, and its history (the
        new run's history starts again at event 1). Its open steps (with their locks, attribute
        snapshots and attempts), its pending channel messages and its attributes stay with the
        flow id; the archived run gets a copy of the attributes and their search index, as they
        were when it ended. The flow row stays (the caller makes it the new run's)."""
        archived = f"{flow_id}{ARCHIVE_SEPARATOR}{run_id}"
        self._last_event = None  # history keys move: add_event reads the last one again
        cols = FLOW_COLUMNS.split(", ")
        select = ", ".join("?" if c == "flow_id" else c for c in cols)
        old = self.c.execute("SELECT num FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()[0]
        new = self.c.execute("SELECT MAX(num) + 1 FROM flows").fetchone()[0]
        self.c.execute(f"INSERT INTO flows ({FLOW_COLUMNS}, num) SELECT {select}, ? FROM flows WHERE flow_id = ?",
                       (archived, new, flow_id))
        if carry:
            self.c.execute(f"UPDATE steps SET flow_id = ? WHERE flow_id = ? AND NOT {step_open('status')}",
                           (archived, flow_id))
            self.c.execute("UPDATE ended_attempts SET flow_id = ? WHERE flow_id = ? AND step_execution_id IN "
                           "(SELECT step_execution_id FROM steps WHERE flow_id = ?)", (archived, flow_id, archived))
            for table, columns in (("attributes", "key, name, instance, value, updated"),
                                   ("search_attributes", "key, attr_key, type, text, num")):
                self.c.execute(f"INSERT INTO {table} (flow_id, {columns}) SELECT ?, {columns} FROM {table} "
                               "WHERE flow_id = ?", (archived, flow_id))
        else:
            for table in ("steps", "ended_attempts", "channel_messages", "attributes", "search_attributes",
                          "attribute_locks", "attribute_snapshots"):
                self.c.execute(f"UPDATE {table} SET flow_id = ? WHERE flow_id = ?", (archived, flow_id))
        # its history moves to the archived row's range of keys (see schema.sql)
        self.c.execute("UPDATE history SET flow_id = ?, seq = seq + ? WHERE seq > ? AND seq < ?",
                       (archived, (new - old) << 24, old << 24, (old + 1) << 24))
        if not carry:
            self.c.execute("DELETE FROM flows WHERE flow_id = ?", (flow_id,))
        return archived

    # --- a new run made from an archived one (time travel) ------------------------------------
    def run_history(self, flow_id: str) -> list[HistoryRecord]:
        """A run's events in order (as Store.history_of, inside this transaction)."""
        rows = self.c.execute(
            f"SELECT {HISTORY_COLUMNS} FROM history, (SELECT num << 24 AS base FROM flows WHERE flow_id = ?) "
            "WHERE seq > base AND seq < base + 16777216 ORDER BY seq", (flow_id,)).fetchall()
        return [history_record(r, db_of(self.c)) for r in rows]

    def run_steps(self, flow_id: str) -> list[StepRecord]:
        rows = self.c.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? ORDER BY seq", (flow_id,))
        return [step_record(r, db_of(self.c)) for r in rows.fetchall()]

    def archived_runs(self, flow_id: str) -> list[FlowRecord]:
        """The earlier runs of a flow id, kept as `<flow_id>$<run_id>`, oldest first."""
        where, args = prefix_range("flow_id", flow_id + ARCHIVE_SEPARATOR)  # the primary key's index, no scan
        rows = self.c.execute(f"SELECT {FLOW_COLUMNS} FROM flows WHERE {where} ORDER BY num", args).fetchall()
        return [flow_record(r, db_of(self.c)) for r in rows]

    def copy_history(self, source: str, target: str, last_event_id: int) -> None:
        """Copy a run's events 1..last_event_id, ids and times as they were, to the (empty) history
        of `target`."""
        self._last_event = None  # add_event reads the last key again
        self.c.execute(
            "INSERT INTO history (seq, flow_id, event_time, type, payload) "
            "SELECT (t.num << 24) + (h.seq & 16777215), t.flow_id, h.event_time, h.type, h.payload "
            "FROM history h, flows s, flows t WHERE s.flow_id = ? AND t.flow_id = ? "
            "AND h.seq > s.num << 24 AND h.seq <= (s.num << 24) + ? ORDER BY h.seq", (source, target, last_event_id))

    def copy_steps(self, source: str, target: str, seids: list[str]) -> None:
        """Copy step executions (rows and ended attempts, as they are) from one run to another."""
        if not seids:
            return
        marks = ",".join("?" for _ in seids)
        cols = STEP_COLUMNS.split(", ")
        select = ", ".join("?" if c == "flow_id" else c for c in cols)
        self.c.execute(f"INSERT INTO steps ({STEP_COLUMNS}) SELECT {select} FROM steps "
                       f"WHERE flow_id = ? AND step_execution_id IN ({marks})", (target, source, *seids))
        rest = ("step_execution_id, attempt, owner, start_time, end_time, outcome, error_type, detail, heartbeats, "
                "last_heartbeat, stream_writes, method, stack_trace")
        self.c.execute(f"INSERT INTO ended_attempts (flow_id, {rest}) SELECT ?, {rest} FROM ended_attempts "
                       f"WHERE flow_id = ? AND step_execution_id IN ({marks})", (target, source, *seids))

    def carry_run(self, flow_id: str, clock_offset: float, completions: str, graceful: bool) -> None:
        """What a new run takes over from the run it was made from: its clock, the outputs
        collected up to the point it starts from, whether a step had asked to complete."""
        self.c.execute("UPDATE flows SET clock_offset = ?, completions = ?, graceful = ? WHERE flow_id = ?",
                       (clock_offset, completions, int(graceful), flow_id))

    def number_attempts_after(self, flow_id: str, seid: str, attempts: int) -> None:
        """A step execution queued again in a new run numbers its attempts after the `attempts`
        the old run's row had (its handler still counts from 1: attempt - method_base), so a
        late write of an old attempt can never pass for one of the new run's (the fence)."""
        self.c.execute("UPDATE steps SET attempt = ?, method_base = ? WHERE flow_id = ? AND step_execution_id = ?",
                       (attempts, attempts, flow_id, seid))
    def end_continued_run(self, archived: str, now: float) -> None:
        """The archived run of a continue-as-new is CONTINUED_AS_NEW, closed `now`."""
        self.c.execute("UPDATE flows SET status = 'CONTINUED_AS_NEW', close_time = ? WHERE flow_id = ?",
                       (now, archived))

    def begin_continued_run(self, flow_id: str, run_id: str, first_run_id: str, step_numbers: str,
                            now: float) -> None:
        """The flow row becomes the new run of a continue-as-new: its id, the chain's first run,
        how many step executions the earlier runs numbered, its start (the rest carries on)."""
        self.c.execute("UPDATE flows SET run_id = ?, first_run_id = ?, step_numbers = ?, start_time = ? "
                       "WHERE flow_id = ?", (run_id, first_run_id, step_numbers, now, flow_id))

    def step_numbers_of(self, flow_id: str) -> dict[str, int]:
        """How many step executions of each type ("" = all) the flow's earlier runs and this one
        keep, for the next run of a continue-as-new: its open ones stay in the flow's rows and
        are counted there (Tx.next_step_number adds both)."""
        row = self.c.execute("SELECT step_numbers FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()
        counts: dict[str, int] = json.loads(row[0]) if row and row[0] else {}
        for step_type, n in self.c.execute("SELECT step_type, COUNT(*) FROM steps WHERE flow_id = ? AND NOT "
                                           f"{step_open('status')} GROUP BY step_type",
                                           (flow_id,)).fetchall():
            counts[step_type] = counts.get(step_type, 0) + int(n)
            counts[""] = counts.get("", 0) + int(n)
        return counts

    def run_event_count(self, flow_id: str, types: tuple[str, ...]) -> int:
        """How many events of `types` the flow's current run has in its history."""
        marks = ",".join("?" for _ in types)
        row = self.c.execute(f"SELECT COUNT(*) FROM history h JOIN flows f ON f.flow_id = ? WHERE h.seq > f.num << 24 "
                             f"AND h.seq < (f.num + 1) << 24 AND h.type IN ({marks})", (flow_id, *types)).fetchone()
        return int(row[0])
