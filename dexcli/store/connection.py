"""Opening a dex database: checks, pragmas, schema.

Connection settings: WAL, busy_timeout, foreign keys, `synchronous` NORMAL by default (FULL on
request: NORMAL in WAL mode can lose the last transactions on power loss, never on a process
crash). The schema version lives in `PRAGMA user_version`; a newer one is refused.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from dexcli.store.errors import StoreError

SCHEMA_VERSION = 2
WAL_AUTOCHECKPOINT_PAGES = 10_000
APP_ID = 0x0DE7  # PRAGMA application_id marks a dex database


class Cursor(sqlite3.Cursor):
    """fetchone() that finishes the statement: an unfinished SELECT would keep its read
    snapshot open in WAL mode, and this connection would stop seeing other processes' commits."""

    def fetchone(self) -> Any:
        rows = self.fetchall()
        return rows[0] if rows else None


class Connection(sqlite3.Connection):
    def cursor(self, factory: Any = Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        return self.cursor().execute(sql, parameters)


def scalar(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(sql, args).fetchone()
    return None if row is None else row[0]


def _check_path(path: str, create: bool) -> None:
    p = Path(path)
    if path == ":memory:":
        return
    if p.exists():
        # Never open the file ourselves: closing any descriptor of it would drop this
        # process's POSIX locks held by other connections. SQLite reports a non-database.
        if p.is_dir():
            raise StoreError(f"database path {path} is a directory")
        return
    if not create:
        raise StoreError(f"no dex database at {path}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the database folder {p.parent}: {exc.strerror}") from exc
    if not os.access(p.parent, os.W_OK):
        raise StoreError(f"cannot write the database: {p.parent} is not writable")


def _identify(path: str) -> tuple[Connection, int, int]:
    """Connect and read (application id, schema version) in one snapshot: another process
    may be creating the schema right now."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30,
                               factory=Connection)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("BEGIN")
        try:
            app_id = scalar(conn, "PRAGMA application_id")
            version = scalar(conn, "PRAGMA user_version")
            tables = scalar(conn, "SELECT COUNT(*) FROM sqlite_master")
        finally:
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} is not a dex database ({exc})") from exc
    if tables and app_id != APP_ID:
        conn.close()
        raise StoreError(f"{path} is not a dex database (it has other tables)")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path} has schema version {version}, newer than this dex understands "
                         f"({SCHEMA_VERSION}); upgrade dex")
    return conn, app_id, version


def open_connection(path: str, *, create: bool, synchronous: str) -> Connection:
    _check_path(path, create)
    conn, _, version = _identify(path)
    try:
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            # Checkpoint every ~40 MiB of WAL instead of every 4 MiB: the same pages are
            # rewritten by many small commits, so fewer checkpoints copy (and, with
            # synchronous=NORMAL, fsync) far less. Commits get about a third cheaper.
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        if version == 0:
            _create_schema(conn)
        elif version < SCHEMA_VERSION:
            _migrate(conn, version)
    except sqlite3.OperationalError as exc:
        conn.close()
        msg = str(exc)
        if "readonly" in msg or "unable to open" in msg:
            raise StoreError(f"cannot write the database {path}: {msg}") from exc
        raise StoreError(f"cannot open the database {path}: {msg}") from exc
    return conn


def _schema_sql() -> str:
    from importlib import resources  # only when a schema is written: not on every read path

    return resources.files("dexcli.store").joinpath("schema.sql").read_text()


def _create_schema(conn: Connection) -> None:
    sql = _schema_sql()
    conn.execute("BEGIN IMMEDIATE")
    for stmt in _statements(sql):
        conn.execute(stmt)
    conn.execute(f"PRAGMA application_id = {APP_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("COMMIT")


# What turns a database of version N into N+1 (schema.sql is always the newest whole schema).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        "ALTER TABLE flows ADD COLUMN clock_offset REAL NOT NULL DEFAULT 0",
        "ALTER TABLE steps ADD COLUMN method TEXT NOT NULL DEFAULT 'EXECUTE'",
        "ALTER TABLE steps ADD COLUMN method_base INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE steps ADD COLUMN wait_options TEXT",
        "ALTER TABLE steps ADD COLUMN wait TEXT",
        "ALTER TABLE steps ADD COLUMN wait_started REAL",
        "ALTER TABLE steps ADD COLUMN wait_ended REAL",
        "ALTER TABLE steps ADD COLUMN condition_results TEXT",
        "ALTER TABLE steps ADD COLUMN wait_for_failed INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE steps ADD COLUMN locals TEXT",
        "ALTER TABLE attempts ADD COLUMN method TEXT NOT NULL DEFAULT 'EXECUTE'",
        "ALTER TABLE attempts ADD COLUMN stack_trace TEXT",
        "DROP INDEX IF EXISTS steps_active",
    ),
}


def _migrate(conn: Connection, version: int) -> None:
    """Bring an older database up to SCHEMA_VERSION in one transaction (then add whatever
    schema.sql has that is new: tables and indexes are IF NOT EXISTS)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = scalar(conn, "PRAGMA user_version")  # another process may have migrated it
        for v in range(current, SCHEMA_VERSION):
            for stmt in MIGRATIONS[v]:
                conn.execute(stmt)
        if current < SCHEMA_VERSION:
            sql = _schema_sql()
            for stmt in _statements(sql):
                conn.execute(stmt)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


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
