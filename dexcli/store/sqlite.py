"""SQLite persistence behind one class. Every state transition is one `BEGIN IMMEDIATE`
transaction (`with store.tx() as tx:`); a crash between transactions loses nothing that was
reported done.

Connection settings: WAL, busy_timeout, foreign keys, `synchronous` NORMAL by default (FULL on
request: NORMAL in WAL mode can lose the last transactions on power loss, never on a process
crash). The schema version lives in `PRAGMA user_version`; a newer one is refused.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator

from dexcli.sdk.errors import StoreError

SCHEMA_VERSION = 1
WAL_AUTOCHECKPOINT_PAGES = 10_000
_APP_ID = 0x0DE7  # PRAGMA application_id marks a dex database

_FLOW_COLS = {"run_id", "status", "close_time", "error_type", "error_message", "graceful", "completions"}
_STEP_COLS = {
    "status", "attempt", "first_attempt_at", "next_attempt_at", "lease_owner", "attempt_started_at",
    "last_heartbeat_time", "heartbeat_deadline", "attempt_deadline", "total_deadline", "heartbeat_value",
    "has_heartbeat_value", "decision", "end_time",
}
_UPDATE_STEP_SQL: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
_ATTEMPT_COLS = {"end_time", "outcome", "error_type", "detail", "heartbeats", "stream_writes"}


class _Cursor(sqlite3.Cursor):
    """fetchone() that finishes the statement: an unfinished SELECT would keep its read
    snapshot open in WAL mode, and this connection would stop seeing other processes' commits."""

    def fetchone(self) -> Any:
        rows = self.fetchall()
        return rows[0] if rows else None


class _Connection(sqlite3.Connection):
    def cursor(self, factory: Any = _Cursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = ()) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)


def _row(cur: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cur.description, row)}


class Tx:
    """Statements inside one transaction. Only the store hands these out."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.c = conn
        # Stream usage per (flow type, stream), read once and written once per transaction
        # however many messages it appends (`finish` writes it before COMMIT).
        self._usage: dict[tuple[str, str], int] = {}
        self._usage_dirty: set[tuple[str, str]] | None = None  # created by the first append

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
    def insert_flow_if_new(self, **row: Any) -> bool:
        """Insert a flow unless its id exists (then nothing is written). True when inserted."""
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        cur = self.c.execute(f"INSERT INTO flows ({cols}) VALUES ({marks}) ON CONFLICT(flow_id) DO NOTHING",
                             tuple(row.values()))
        return cur.rowcount == 1

    def get_flow(self, flow_id: str) -> dict[str, Any] | None:
        return self.c.execute("SELECT * FROM flows WHERE flow_id = ?", (flow_id,)).fetchone()

    def get_flow_numbering(self, flow_id: str, step_type: str) -> dict[str, Any] | None:
        """The flow row plus `next_step_number` for one step type, in one statement
        (`_n`, `_seq`: how many steps of that type, and in all, the flow has)."""
        return self.c.execute(
            "SELECT f.*, (SELECT COUNT(*) FROM steps s WHERE s.flow_id = f.flow_id) AS _seq, "
            "(SELECT COUNT(*) FROM steps s WHERE s.flow_id = f.flow_id AND s.step_type = ?) AS _n "
            "FROM flows f WHERE f.flow_id = ?", (step_type, flow_id)).fetchone()

    def update_flow(self, flow_id: str, **fields: Any) -> int:
        assert set(fields) <= _FLOW_COLS, set(fields) - _FLOW_COLS
        sets = ", ".join(f"{k} = ?" for k in fields)
        cur = self.c.execute(f"UPDATE flows SET {sets} WHERE flow_id = ?", (*fields.values(), flow_id))
        return cur.rowcount

    def close_flow(self, flow_id: str, status: str, now: float, error_type: str | None = None,
                   error_message: str | None = None, **fields: Any) -> bool:
        """Close a running flow; `fields` (completions, graceful) are set in the same statement."""
        assert set(fields) <= {"completions", "graceful"}, fields
        extra = "".join(f", {k} = ?" for k in fields)
        cur = self.c.execute(
            f"UPDATE flows SET status = ?, close_time = ?, error_type = ?, error_message = ?{extra} "
            "WHERE flow_id = ? AND status = 'RUNNING'",
            (status, now, error_type, error_message, *fields.values(), flow_id),
        )
        return cur.rowcount == 1

    # --- steps ----------------------------------------------------------------------------
    def next_step_number(self, flow_id: str, step_type: str) -> tuple[int, int]:
        """(n for `<StepType>-<n>`, seq in the flow)."""
        row = self.c.execute(
            "SELECT COUNT(*) AS seq, COALESCE(SUM(step_type = ?), 0) AS n FROM steps WHERE flow_id = ?",
            (step_type, flow_id),
        ).fetchone()
        return int(row["n"]) + 1, int(row["seq"]) + 1

    def insert_step(self, **row: Any) -> None:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.c.execute(f"INSERT INTO steps ({cols}) VALUES ({marks})", tuple(row.values()))

    def get_step(self, flow_id: str, seid: str) -> dict[str, Any] | None:
        return self.c.execute(
            "SELECT * FROM steps WHERE flow_id = ? AND step_execution_id = ?", (flow_id, seid)
        ).fetchone()

    def update_step(self, flow_id: str, seid: str, where: dict[str, Any] | None = None, **fields: Any) -> int:
        """Update one step; `where` adds fencing conditions (owner, attempt, status)."""
        where = where or {}
        shape = (tuple(fields), tuple(where))
        sql = _UPDATE_STEP_SQL.get(shape)
        if sql is None:
            assert set(fields) <= _STEP_COLS, set(fields) - _STEP_COLS
            assert set(where) <= {"lease_owner", "attempt", "status"}, where
            sets = ", ".join(f"{k} = ?" for k in fields)
            conds = "".join(f" AND {k} = ?" for k in where)
            sql = _UPDATE_STEP_SQL[shape] = f"UPDATE steps SET {sets} WHERE flow_id = ? AND step_execution_id = ?{conds}"
        return self.c.execute(sql, (*fields.values(), flow_id, seid, *where.values())).rowcount

    def active_step_count(self, flow_id: str) -> int:
        return _first(self.c.execute(
            "SELECT COUNT(*) FROM steps WHERE flow_id = ? AND status IN ('QUEUED','RUNNING','BACKOFF')",
            (flow_id,),
        ).fetchone())

    def cancel_open_steps(self, flow_id: str, now: float) -> None:
        self.c.execute(
            "UPDATE steps SET status = 'CANCELED', end_time = ?, lease_owner = NULL "
            "WHERE flow_id = ? AND status IN ('QUEUED','RUNNING','BACKOFF')", (now, flow_id),
        )
        self.c.execute(
            "UPDATE attempts SET outcome = 'CANCELED', end_time = ? WHERE flow_id = ? AND outcome = 'RUNNING'",
            (now, flow_id),
        )

    def runnable_steps(self, now: float, flow_ids: list[str] | None, limit: int) -> list[dict[str, Any]]:
        if flow_ids == []:
            return []
        sql = ("SELECT s.*, f.status AS flow_status, f.run_id, f.flow_type, f.flow_ref "
               "FROM steps s JOIN flows f ON f.flow_id = s.flow_id "
               "WHERE s.status IN ('QUEUED','BACKOFF') AND s.next_attempt_at <= ?")
        args: list[Any] = [now]
        if flow_ids is not None:
            sql += f" AND s.flow_id IN ({','.join('?' for _ in flow_ids)})"
            args += flow_ids
        sql += " ORDER BY s.next_attempt_at LIMIT ?"
        return self.c.execute(sql, (*args, limit)).fetchall()

    def expired_foreign_attempts(self, now: float, owner: str, flow_ids: list[str] | None) -> list[dict[str, Any]]:
        if flow_ids == []:
            return []
        sql = ("SELECT * FROM steps WHERE status = 'RUNNING' AND (lease_owner IS NULL OR lease_owner != ?) "
               "AND MIN(heartbeat_deadline, attempt_deadline, total_deadline) <= ?")
        args: list[Any] = [owner, now]
        if flow_ids is not None:
            sql += f" AND flow_id IN ({','.join('?' for _ in flow_ids)})"
            args += flow_ids
        return self.c.execute(sql, args).fetchall()

    # --- attempts -------------------------------------------------------------------------
    def insert_attempt(self, **row: Any) -> None:
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.c.execute(f"INSERT INTO attempts ({cols}) VALUES ({marks})", tuple(row.values()))

    def update_attempt(self, flow_id: str, seid: str, attempt: int, **fields: Any) -> None:
        assert set(fields) <= _ATTEMPT_COLS
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.c.execute(
            f"UPDATE attempts SET {sets} WHERE flow_id = ? AND step_execution_id = ? AND attempt = ?",
            (*fields.values(), flow_id, seid, attempt),
        )

    def bump_attempt_counters(self, flow_id: str, seid: str, attempt: int, heartbeats: int, writes: int,
                              at: float) -> None:
        self.c.execute(
            "UPDATE attempts SET heartbeats = heartbeats + ?, stream_writes = stream_writes + ?, last_heartbeat = ? "
            "WHERE flow_id = ? AND step_execution_id = ? AND attempt = ?",
            (heartbeats, writes, at, flow_id, seid, attempt),
        )

    # --- history --------------------------------------------------------------------------
    def add_event(self, flow_id: str, now: float, type_: str, payload: dict[str, Any]) -> int:
        cur = self.c.execute(
            "INSERT INTO history (flow_id, event_time, type, payload) VALUES (?, ?, ?, ?)",
            (flow_id, now, type_, json.dumps(payload, separators=(",", ":"))),
        )
        return int(cur.lastrowid or 0)

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
            used = _first(self.c.execute(
                "SELECT bytes FROM stream_usage WHERE flow_type = ? AND stream = ?", key
            ).fetchone()) or 0
        if used + size > capacity:
            need = used + size - capacity
            freed = 0
            victims: list[int] = []
            for row in self.c.execute(
                "SELECT id, size FROM stream_messages WHERE flow_type = ? AND stream = ? ORDER BY id",
                (flow_type, stream),
            ):
                victims.append(row["id"])
                freed += row["size"]
                if freed >= need:
                    break
            self.c.executemany("DELETE FROM stream_messages WHERE id = ?", [(v,) for v in victims])
            used -= freed
        cur = self.c.execute(
            "INSERT INTO stream_messages (flow_type, stream, flow_id, source, value, created_time, size) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (flow_type, stream, flow_id, source, value, now, size),
        )
        self._usage[key] = used + size
        if self._usage_dirty is None:
            self._usage_dirty = set()
        self._usage_dirty.add(key)
        return int(cur.lastrowid or 0)

    # --- kv -------------------------------------------------------------------------------
    def kv_get(self, ns: str, key: str) -> Any:
        row = self.c.execute("SELECT value FROM kv WHERE ns = ? AND key = ?", (ns, key)).fetchone()
        return None if row is None else json.loads(row["value"])

    def kv_put(self, ns: str, key: str, value: Any) -> None:
        self.c.execute(
            "INSERT INTO kv (ns, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT(ns, key) DO UPDATE SET value = excluded.value",
            (ns, key, json.dumps(value)),
        )


def _first(row: Any) -> Any:
    if row is None:
        return None
    if isinstance(row, dict):
        return next(iter(row.values()))
    return row[0]


class Store:
    """One dex database. Thread-safe (one lock around the connection)."""

    def __init__(self, path: str | os.PathLike[str], *, synchronous: str = "NORMAL", create: bool = True) -> None:
        self.path = str(path)
        self.commits = 0
        self._lock = threading.RLock()
        self._conn = self._open(create, synchronous)

    # --- opening --------------------------------------------------------------------------
    def _open(self, create: bool, synchronous: str) -> sqlite3.Connection:
        p = Path(self.path)
        if self.path != ":memory:":
            if p.exists():
                # Never open the file ourselves: closing any descriptor of it would drop this
                # process's POSIX locks held by other connections. SQLite reports a non-database.
                if p.is_dir():
                    raise StoreError(f"database path {self.path} is a directory")
            elif not create:
                raise StoreError(f"no dex database at {self.path}")
            else:
                try:
                    p.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"cannot create the database folder {p.parent}: {exc.strerror}") from exc
                if not os.access(p.parent, os.W_OK):
                    raise StoreError(f"cannot write the database: {p.parent} is not writable")
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30,
                                   factory=_Connection)
            conn.row_factory = _row
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("BEGIN")  # one snapshot: another process may be creating the schema now
            try:
                app_id = _first(conn.execute("PRAGMA application_id").fetchone())
                version = _first(conn.execute("PRAGMA user_version").fetchone())
                tables = _first(conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone())
            finally:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a dex database ({exc})") from exc
        if tables and app_id != _APP_ID:
            conn.close()
            raise StoreError(f"{self.path} is not a dex database (it has other tables)")
        if version > SCHEMA_VERSION:
            conn.close()
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this dex understands "
                f"({SCHEMA_VERSION}); upgrade dex"
            )
        try:
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
                # Checkpoint every ~40 MiB of WAL instead of every 4 MiB: the same pages are
                # rewritten by many small commits, so fewer checkpoints copy (and, with
                # synchronous=NORMAL, fsync) far less. Commits get about a third cheaper.
                conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA synchronous = {synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            if version < SCHEMA_VERSION:
                sql = resources.files("dexcli.store").joinpath("schema.sql").read_text()
                conn.execute("BEGIN IMMEDIATE")
                for stmt in _statements(sql):
                    conn.execute(stmt)
                conn.execute(f"PRAGMA application_id = {_APP_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            conn.close()
            msg = str(exc)
            if "readonly" in msg or "unable to open" in msg:
                raise StoreError(f"cannot write the database {self.path}: {msg}") from exc
            raise StoreError(f"cannot open the database {self.path}: {msg}") from exc
        return conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # --- transactions ---------------------------------------------------------------------
    @contextmanager
    def tx(self) -> Iterator[Tx]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            tx = Tx(self._conn)
            try:
                yield tx
                tx.finish()
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
            self.commits += 1

    def read(self, fn: Callable[[Tx], Any]) -> Any:
        """Run read-only statements without taking the write lock (no transaction, no commit)."""
        with self._lock:
            return fn(Tx(self._conn))

    def _all(self, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> dict[str, Any] | None:
        with self._lock:
            return self._conn.execute(sql, args).fetchone()

    # --- clock ----------------------------------------------------------------------------
    def clock_offset(self) -> float:
        row = self._one("SELECT value FROM meta WHERE key = 'clock_offset'")
        return float(row["value"]) if row else 0.0

    def set_clock_offset(self, offset: float) -> None:
        with self.tx() as tx:
            tx.c.execute(
                "INSERT INTO meta (key, value) VALUES ('clock_offset', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value "
                "WHERE CAST(excluded.value AS REAL) > CAST(meta.value AS REAL)",
                (repr(offset),),
            )

    # --- reads ----------------------------------------------------------------------------
    def get_flow(self, flow_id: str) -> dict[str, Any] | None:
        return self._one("SELECT * FROM flows WHERE flow_id = ?", (flow_id,))

    def list_flows(self, status: str | None = None, flow_type: str | None = None,
                   limit: int = 50) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM flows WHERE 1=1", []
        if status:
            sql += " AND status = ?"
            args.append(status)
        if flow_type:
            sql += " AND flow_type = ?"
            args.append(flow_type)
        sql += " ORDER BY start_time DESC, rowid DESC LIMIT ?"
        args.append(limit)
        return self._all(sql, tuple(args))

    def running_flow_ids(self) -> list[str]:
        return [r["flow_id"] for r in self._all("SELECT flow_id FROM flows WHERE status = 'RUNNING'")]

    def steps_of(self, flow_id: str) -> list[dict[str, Any]]:
        return self._all("SELECT * FROM steps WHERE flow_id = ? ORDER BY seq", (flow_id,))

    def attempts_of(self, flow_id: str) -> list[dict[str, Any]]:
        return self._all(
            "SELECT * FROM attempts WHERE flow_id = ? ORDER BY start_time, step_execution_id, attempt", (flow_id,)
        )

    def history_of(self, flow_id: str, after_event_id: int = 0) -> list[dict[str, Any]]:
        return self._all(
            "SELECT * FROM history WHERE flow_id = ? AND event_id > ? ORDER BY event_id", (flow_id, after_event_id)
        )

    def stream_messages(self, flow_id: str, stream: str | None = None, after_id: int = 0,
                        limit: int = 1000, newest_first: bool = False, before_id: int | None = None
                        ) -> list[dict[str, Any]]:
        sql, args = "SELECT * FROM stream_messages WHERE flow_id = ? AND id > ?", [flow_id, after_id]
        if stream is not None:
            sql += " AND stream = ?"
            args.append(stream)
        if before_id is not None:
            sql += " AND id < ?"
            args.append(before_id)
        sql += f" ORDER BY id {'DESC' if newest_first else 'ASC'} LIMIT ?"
        args.append(limit)
        return self._all(sql, tuple(args))

    def schedule(self, flow_ids: list[str] | None, owner: str
                 ) -> tuple[float | None, list[tuple[str | None, float | None]]]:
        """In one statement: the earliest time a queued step or a retry becomes runnable, and
        the running attempts other owners hold, each with its first deadline."""
        if flow_ids == []:
            return None, []
        cond, args = "", []
        if flow_ids is not None:
            cond = f" AND flow_id IN ({','.join('?' for _ in flow_ids)})"
            args = list(flow_ids)
        rows = self._all(
            f"SELECT 0 AS k, NULL AS lease_owner, MIN(next_attempt_at) AS t FROM steps "
            f"WHERE status IN ('QUEUED','BACKOFF'){cond} "
            "UNION ALL SELECT 1, lease_owner, MIN(heartbeat_deadline, attempt_deadline, total_deadline) FROM steps "
            f"WHERE status = 'RUNNING' AND (lease_owner IS NULL OR lease_owner != ?){cond}",
            (*args, owner, *args))
        due = next((r["t"] for r in rows if r["k"] == 0), None)
        return due, [(r["lease_owner"], r["t"]) for r in rows if r["k"] == 1]

    # --- kv for examples ------------------------------------------------------------------
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

    def kv_update_many(self, updates: list[tuple[str, str, Callable[[Any], Any]]]) -> list[Any]:
        """Several read-modify-writes in one transaction. Each result is the new value, or the
        exception its `fn` raised (that one writes nothing; the others still commit)."""
        out: list[Any] = []
        with self.tx() as tx:
            for ns, key, fn in updates:
                try:
                    new = fn(tx.kv_get(ns, key))
                except Exception as exc:
                    out.append(exc)
                    continue
                tx.kv_put(ns, key, new)
                out.append(new)
        return out

    def kv_keys(self, ns: str) -> list[str]:
        return [r["key"] for r in self._all("SELECT key FROM kv WHERE ns = ? ORDER BY key", (ns,))]


def _statements(sql: str) -> list[str]:
    out, buf = [], []
    for line in sql.splitlines():
        stripped = line.split("--", 1)[0]
        buf.append(stripped)
        if stripped.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt.strip(";").strip():
                out.append(stmt)
            buf = []
    return out
