"""One dex database behind one class. Every state transition is one `BEGIN IMMEDIATE`
transaction (`with store.tx() as tx:`); a crash between transactions loses nothing that was
reported done. Reads outside a transaction take no write lock.
"""

from __future__ import annotations

import contextlib
import glob
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dexcli.store import attempt_rows
from dexcli.store.clocks import check_skip, rebase_flow
from dexcli.store.connection import DEFAULT_BUSY_TIMEOUT, open_connection, scalar
from dexcli.store.errors import DamagedDatabaseError, DatabaseConditionError, StoreError
from dexcli.store.indexed import FLOWS_WITH_OFFSET, FLOWS_WITH_TIMEOUT, STEPS_DUE, due_first, foreign_running
from dexcli.store.owners import owner_holds
from dexcli.store.records import (
    FLOW_COLUMNS,
    HISTORY_COLUMNS,
    STEP_COLUMNS,
    STREAM_COLUMNS,
    AttemptRecord,
    FlowRecord,
    FlowState,
    HistoryRecord,
    Schedule,
    Skipped,
    StepRecord,
    StreamRecord,
    attempt_record,
    flow_record,
    history_record,
    step_record,
    stream_record,
)
from dexcli.store.tx import Tx
from dexcli.store.tx_runs import ARCHIVE_SEPARATOR

T = TypeVar("T")
_IN_CHUNK = 500  # ids per IN list: well under SQLite's bound on a statement's parameters
# the history columns with the event id numbered per flow (1, 2, ... in the table's id order)


class Store:
    """One dex database. Thread-safe (one lock around the connection)."""

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "NORMAL", create: bool = True,
                 busy_timeout: float = DEFAULT_BUSY_TIMEOUT, read_only: bool = False) -> None:
        """`busy_timeout`: seconds a write waits for another process's write lock before it
        fails with DatabaseLockedError. `read_only`: open an existing database to read it only
        (never created; a write fails with ReadOnlyDatabaseError); one from an older dex is
        upgraded first if the file can be written."""
        self.path = str(path)
        self.commits = 0
        self.deferred = 0  # transactions applied and not yet committed (tx(durable=False))
        self.deferred_at = 0.0  # time.monotonic() when the first of them was applied
        self.commit_seconds = 0.0  # time spent in COMMIT statements (the WAL writes), for bench/
        self._lock = threading.RLock()
        # Attribute Store projections marked since the last COMMIT; committed and not yet told
        self._synced = self._committed_synced = False
        self._on_synced: Callable[[], None] | None = None

        def upgrade() -> None:
            Store(path, synchronous=synchronous, create=False, busy_timeout=busy_timeout).close()

        self._conn = open_connection(self.path, create=create and not read_only, synchronous=synchronous,
                                     busy_timeout=busy_timeout, upgrade=upgrade if read_only else None)
        if not read_only:
            self._adopt_database_offset()

    def close(self) -> None:
        with self._lock:
            self.commit_deferred()
            self._conn.close()

    @property
    def statements(self) -> int:
        """SQL statements run on this store's connection so far, BEGIN and COMMIT included (bench/)."""
        return self._conn.statements

    @property
    def failure(self) -> DatabaseConditionError | None:
        """The last condition outside dex that failed a statement (disk full, a lock held too
        long, the file deleted or replaced), or None."""
        return self._conn.failure

    def notify_failures(self, fn: Callable[[DatabaseConditionError], None] | None) -> None:
        """Call `fn` with each such condition as it happens, before the statement raises it
        (also for writes nobody awaits, such as a heartbeat's), from the thread that wrote."""
        self._conn.on_failure = fn

    # --- transactions ---------------------------------------------------------------------
    @contextmanager
    def tx(self, *, durable: bool = True) -> Iterator[Tx]:
        """A write transaction, committed when the block ends. With durable=False (ASYNC
        durability) it is applied but left open: later transactions join it (each as a
        savepoint, so one that fails undoes only itself) and the first durable one, or
        `commit_deferred`, commits them all. Until then a crash loses them, and other
        processes neither see them nor write (they wait for the commit)."""
        with self._lock:
            nested = self.deferred > 0
            self._conn.execute("SAVEPOINT joined" if nested else "BEGIN IMMEDIATE")
            tx = Tx(self._conn)
            try:
                yield tx
                tx.finish()
            except BaseException:
                self._conn.execute("ROLLBACK TO joined" if nested else "ROLLBACK")
                if nested:
                    self._conn.execute("RELEASE joined")
                raise
            if nested:
                self._conn.execute("RELEASE joined")
            self._synced = self._synced or tx.synced_attributes
            if durable:
                self._commit()
            else:
                if not self.deferred:
                    self.deferred_at = time.monotonic()
                self.deferred += 1
        self._tell_synced()

    def commit_deferred(self, *, since: float | None = None) -> None:
        """Commit the transactions `tx(durable=False)` left open (nothing when there are none);
        with `since` (a time.monotonic()), only if the first of them was applied by then."""
        with self._lock:
            if self.deferred and (since is None or self.deferred_at <= since):
                self._commit()
        self._tell_synced()

    def on_attribute_sync(self, fn: Callable[[], None] | None) -> None:
        """Call `fn` after each COMMIT that marked Attribute Store projections (outside the
        store's lock, on the committing thread): the engine's drainer writes them out."""
        self._on_synced = fn

    def _tell_synced(self) -> None:
        if self._committed_synced and self._on_synced is not None:
            self._committed_synced = False
            self._on_synced()

    def _commit(self) -> None:
        t0 = time.perf_counter()
        try:
            self._conn.execute("COMMIT")
            self._committed_synced = self._committed_synced or self._synced
        finally:
            self.deferred = 0  # a COMMIT that fails is rolled back (see connection.py)
            self._synced = False
        self.commit_seconds += time.perf_counter() - t0
        self.commits += 1

    def read(self, fn: Callable[[Tx], T]) -> T:
        """Run read-only statements without taking the write lock (no transaction, no commit)."""
        with self._lock:
            return fn(Tx(self._conn))

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            rows: list[tuple[Any, ...]] = self._conn.execute(sql, args).fetchall()
            return rows

    # --- clocks: each flow has its own (real time plus its offset) ------------------------
    def _adopt_database_offset(self) -> None:
        """A database from before per-flow clocks kept one offset for every flow (meta
        'clock_offset'): it becomes each flow's own offset, once, and the database one goes."""
        try:
            with self._lock:
                value = scalar(self._conn, "SELECT value FROM meta WHERE key = 'clock_offset'")
            if value is None:
                return
            with self.tx() as tx:
                tx.c.execute("UPDATE flows SET clock_offset = clock_offset + ?", (float(value),))
                tx.c.execute("DELETE FROM meta WHERE key = 'clock_offset'")
        except sqlite3.OperationalError:
            pass  # a read-only database: its flows are read as they are

    def flow_offsets(self, flow_ids: list[str] | None) -> dict[str, float]:
        """The running flows' clock offsets (those not zero), of these flows or of all."""
        sql, args = f"SELECT flow_id, clock_offset FROM flows WHERE {FLOWS_WITH_OFFSET}", []
        if flow_ids is not None:
            sql += f" AND flow_id IN ({','.join('?' for _ in flow_ids)})"
            args = list(flow_ids)
        return {fid: float(off) for fid, off in self._rows(sql, tuple(args))}

    def skip_flows(self, flow_ids: list[str] | None, seconds: float, mine: str | None = None) -> Skipped:
        """Move these flows' clocks (None: every running flow's) forward by `seconds`, in one
        transaction (two skips at once both count).

        A flow a live process holds a lease of is not moved: that process heartbeats in real
        time, and a jump would make its lease expire under it (its attempt declared lost while
        healthy). Leases of owners `mine:…` (the caller's own sessions) do not count."""
        if flow_ids == []:
            return Skipped({}, {})
        cond, args = "status = 'RUNNING'", []
        if flow_ids is not None:
            cond = f"flow_id IN ({','.join('?' for _ in flow_ids)})"
            args = list(flow_ids)
        with self.tx() as tx:
            check_skip(tx.c, cond, args, seconds)
            held: dict[str, str] = {}
            for fid, owner in tx.c.execute(
                    "SELECT s.flow_id, s.lease_owner FROM steps s WHERE s.status = 'RUNNING' AND "
                    f"s.lease_owner IS NOT NULL AND s.flow_id IN (SELECT flow_id FROM flows WHERE {cond})",
                    args).fetchall():
                if fid not in held and not (mine and owner.startswith(mine + ":")) and owner_holds(owner):
                    held[fid] = owner
            move = f"{cond} AND flow_id NOT IN ({','.join('?' for _ in held)})"
            tx.c.execute(f"UPDATE flows SET clock_offset = clock_offset + ? WHERE {move}",
                         (max(0.0, seconds), *args, *held))
            rows = tx.c.execute(f"SELECT flow_id, clock_offset FROM flows WHERE {move}", (*args, *held)).fetchall()
        return Skipped({fid: float(off) for fid, off in rows}, held)

    def reset_flow_clock(self, flow_id: str) -> float:
        """Put a flow back on real time: its offset becomes 0 and every time it stored moves
        back by the old offset, so what is due stays due when it was. Returns the old offset."""
        with self.tx() as tx:
            return rebase_flow(tx.c, flow_id)

    # --- owners that stopped without recording it ---------------------------------------
    def _stopped_mark(self, owner: str) -> str:
        return f"{self.path}-stopped-{owner}"

    def record_stopped(self, owner: str) -> bool:
        """This process stops, and the release of the leases `owner` holds could not be written
        (the disk is full): leave an empty file beside the database naming the owner — making
        one needs no data block — so the next process to drive releases them at once instead
        of waiting for their heartbeat deadlines. False when even that failed."""
        if self.path == ":memory:" or "/" in owner:
            return False
        try:
            os.close(os.open(self._stopped_mark(owner), os.O_WRONLY | os.O_CREAT, 0o600))
        except OSError:
            return False
        return True

    def stopped_owners(self) -> list[str]:
        """The owners whose process stopped without recording the release of its leases."""
        if self.path == ":memory:":
            return []
        prefix = self._stopped_mark("")
        return [p[len(prefix):] for p in glob.glob(glob.escape(prefix) + "*")]

    def forget_stopped(self, owner: str) -> None:
        """Its leases were released: the mark goes."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._stopped_mark(owner))

    # --- reads ----------------------------------------------------------------------------
    def check_usable(self) -> None:
        """StoreError unless the database can be used now: open, still the file at its path,
        and its tables readable (Client.health_check). Cheap: one stat and one indexed read."""
        with self._lock:
            try:
                self._conn.execute("SELECT 1 FROM flows LIMIT 1").fetchall()
            except sqlite3.ProgrammingError as exc:  # what a closed connection raises
                raise StoreError(f"the database {self.path} is closed") from exc
            self._conn.check_identity_now()

    def check_integrity(self) -> None:
        """DamagedDatabaseError unless SQLite finds every page and index of the file sound
        (`PRAGMA quick_check`: it reads the whole file, for `dex doctor`)."""
        found = [str(r[0]) for r in self._rows("PRAGMA quick_check(20)")]
        if found != ["ok"]:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            raise DamagedDatabaseError(f"the database {self.path} is damaged: {found[0]}{more}")

    def get_flow(self, flow_id: str) -> FlowRecord | None:
        rows = self._rows(f"SELECT {FLOW_COLUMNS} FROM flows WHERE flow_id = ?", (flow_id,))
        return flow_record(rows[0], self.path) if rows else None

    def runs_of(self, flow: FlowRecord) -> list[FlowRecord]:
        """The runs of `flow`'s continue-as-new chain, first to last: the earlier ones (kept as
        `<flow_id>$<run_id>`, CONTINUED_AS_NEW) and the one that goes on under the flow id;
        [] for a run that is not in a chain."""
        if flow.first_run_id is None and flow.status is not FlowState.CONTINUED_AS_NEW:
            return []
        base, first = flow.flow_id.split(ARCHIVE_SEPARATOR, 1)[0], flow.chain_first_run_id
        lo, hi = base + ARCHIVE_SEPARATOR, base + chr(ord(ARCHIVE_SEPARATOR) + 1)
        rows = self._rows(f"SELECT {FLOW_COLUMNS} FROM flows WHERE flow_id = ? OR (flow_id > ? AND flow_id < ? "
                          "AND status = 'CONTINUED_AS_NEW' AND (run_id = ? OR first_run_id = ?)) "
                          "ORDER BY flow_id = ?, num",  # archived in the order they ended; then the flow id's
                          (base, lo, hi, first, first, base))
        runs = [flow_record(r, self.path) for r in rows]
        return [r for r in runs if r.chain_first_run_id == first]

    def list_flows(self, status: FlowState | None = None, flow_type: str | None = None,
                   limit: int = 50) -> list[FlowRecord]:
        sql, args = f"SELECT {FLOW_COLUMNS} FROM flows WHERE 1=1", []
        if status is not None:
            sql += " AND status = ?"
            args.append(status.value)
        if flow_type:
            sql += " AND flow_type = ?"
            args.append(flow_type)
        sql += " ORDER BY start_time DESC, rowid DESC LIMIT ?"
        return [flow_record(r, self.path) for r in self._rows(sql, (*args, limit))]

    def flow_count(self) -> int:
        """How many flows the database holds (runs kept under `<id>$<run-id>` included)."""
        return int(self._rows("SELECT COUNT(*) FROM flows")[0][0])

    def status_counts(self) -> dict[FlowState, int]:
        """How many flows are in each status (runs kept under `<id>$<run-id>` included); a
        status no flow has is left out."""
        return {FlowState(s): int(n) for s, n in self._rows("SELECT status, COUNT(*) FROM flows GROUP BY status")}

    def running_flow_ids(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT flow_id FROM flows WHERE status = 'RUNNING'")]

    def running_descendants(self, flow_ids: list[str]) -> list[str]:
        """The running SubFlows started by these flows, and theirs, at any depth (a drive of a
        parent drives its children too). One indexed read (flows_children) per generation: a
        flow that never started a SubFlow, the usual drive, costs one probe that finds nothing."""
        found: list[str] = []
        seen: set[str] = set()
        parents = list(flow_ids)
        while parents:
            children: list[str] = []
            for i in range(0, len(parents), _IN_CHUNK):
                part = parents[i:i + _IN_CHUNK]
                rows = self._rows(f"SELECT flow_id, status FROM flows WHERE parent_flow_id IN "
                                  f"({', '.join('?' * len(part))}) AND parent_flow_id IS NOT NULL", tuple(part))
                for fid, status in rows:
                    if fid not in seen:  # each once, as a recursive UNION would
                        seen.add(fid)
                        children.append(fid)
                        if status == FlowState.RUNNING.value:
                            found.append(fid)
            parents = children
        return found

    def steps_of(self, flow_id: str) -> list[StepRecord]:
        return [step_record(r, self.path) for r in
                self._rows(f"SELECT {STEP_COLUMNS} FROM steps WHERE flow_id = ? ORDER BY seq", (flow_id,))]

    def attempts_of(self, flow_id: str) -> list[AttemptRecord]:
        return [attempt_record(r, self.path) for r in self._rows(attempt_rows.OF_FLOW, (flow_id,))]

    def history_of(self, flow_id: str, after_event_id: int = 0) -> list[HistoryRecord]:
        """A flow's history in order (event ids count per flow from 1, as in Dex)."""
        return [history_record(r, self.path) for r in self._rows(
            f"SELECT {HISTORY_COLUMNS} FROM history, (SELECT num << 24 AS base FROM flows WHERE flow_id = ?) "
            "WHERE seq > base + ? AND seq < base + 16777216 ORDER BY seq", (flow_id, after_event_id))]

    def stream_messages(self, flow_id: str, stream: str | None = None, after_id: int = 0,
                        limit: int = 1000, newest_first: bool = False, before_id: int | None = None
                        ) -> list[StreamRecord]:
        sql = f"SELECT {STREAM_COLUMNS} FROM stream_messages WHERE flow_id = ? AND id > ?"
        args: list[Any] = [flow_id, after_id]
        if stream is not None:
            sql += " AND stream = ?"
            args.append(stream)
        if before_id is not None:
            sql += " AND id < ?"
            args.append(before_id)
        sql += f" ORDER BY id {'DESC' if newest_first else 'ASC'} LIMIT ?"
        return [stream_record(r, self.path) for r in self._rows(sql, (*args, limit))]

    def schedule(self, flow_ids: list[str] | None, owner: str) -> Schedule:
        """In one statement: the earliest time a queued step or a retry becomes runnable (or a
        flow's timeout fires), and the running attempts other owners hold, each with its first
        deadline. Times are real: a flow's stored times are on its own clock (real time plus its
        offset). Of every flow (a worker's pass), the earliest open step is read as the first of
        each `indexed.due_first` part, not as a MIN over every open step."""
        if flow_ids == []:
            return Schedule(None, ())
        cond, args = "", []
        if flow_ids is not None:
            cond = f" AND s.flow_id IN ({','.join('?' for _ in flow_ids)})"
            args = list(flow_ids)
            due = ("SELECT 0, NULL, MIN(s.next_attempt_at - f.clock_offset) FROM steps s JOIN flows f USING (flow_id) "
                   f"WHERE {STEPS_DUE}{cond}")
        else:
            due = " UNION ALL ".join(f"SELECT 0, NULL, ({part})" for part in
                                     due_first("SELECT s.next_attempt_at - f.clock_offset", limit="1"))
        running = foreign_running(
            "SELECT 1, s.lease_owner, MIN(s.heartbeat_deadline, s.attempt_deadline, s.total_deadline) - f.clock_offset "
            "FROM steps s JOIN flows f USING (flow_id) WHERE ", cond)
        rows = self._rows(
            f"{due} UNION ALL {running} "
            "UNION ALL SELECT 0, NULL, MIN(f.timeout_at - f.clock_offset) FROM flows f "  # flow timeouts
            f"WHERE {FLOWS_WITH_TIMEOUT}{cond.replace('s.flow_id', 'f.flow_id')}",
            (*args, *[*(owner, *args)] * 3, *args))
        due_at = min((t for k, _, t in rows if k == 0 and t is not None), default=None)
        return Schedule(due_at, tuple((o, t) for k, o, t in rows if k == 1))

    # --- kv: small state a flow package owns (dexcli.host) --------------------------------
    def kv_get(self, ns: str, key: str) -> Any:
        return self.read(lambda tx: tx.kv_get(ns, key))

    def kv_put(self, ns: str, key: str, value: Any) -> None:
        with self.tx() as tx:
            tx.kv_put(ns, key, value)

    def kv_update(self, ns: str, key: str, fn: Callable[[Any], Any]) -> Any:
        """Read-modify-write one value atomically; `fn` may raise to abort."""
        with self.tx() as tx:
            new = fn(tx.kv_get(ns, key))
            tx.kv_put(ns, key, new)
            return new
