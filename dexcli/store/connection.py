"""Opening a dex database: checks, pragmas, schema.

Connection settings: WAL, busy_timeout (30 s unless the opener says otherwise), foreign keys,
`synchronous` NORMAL by default (FULL on request: NORMAL in WAL mode can lose the last
transactions on power loss, never on a process crash). The schema version lives in
`PRAGMA user_version`; a newer one is refused.

Conditions outside dex are named plainly (dexcli.store.errors): a path that cannot be opened
says why (permissions of the file, its folder, its -wal/-shm files); a full disk, a write lock
held by another process past the busy timeout, and a database file deleted or replaced under a
running process each fail the statement with a `DatabaseConditionError`. A COMMIT that fails is
rolled back, so the connection stays usable and nothing half-written is left.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from dexcli.store.errors import (
    DamagedDatabaseError,
    DatabaseConditionError,
    DatabaseLockedError,
    DatabaseMissingError,
    DatabaseReplacedError,
    DiskFullError,
    NotADexDatabaseError,
    ReadOnlyDatabaseError,
    StoreError,
)
from dexcli.store.files import create_private, read_only_uri, sides

SCHEMA_VERSION = 10
# The oldest version this dex reads as it is, where it may not write: the versions after it
# changed only what writes need (10: steps_open's WHERE spelled as equalities).
READS_AS_IS = 9
WAL_AUTOCHECKPOINT_PAGES = 10_000
CACHE_KIB = 32 * 1024  # the page cache of a connection that writes (PRAGMA cache_size)
APP_ID = 0x0DE7  # PRAGMA application_id marks a dex database
DEFAULT_BUSY_TIMEOUT = 30.0  # seconds a write waits for another process's write lock
# How often (at most) a write transaction checks that the path still names the file opened:
# one stat() per interval, not per commit.
IDENTITY_CHECK_INTERVAL = 0.5


class Cursor(sqlite3.Cursor):
    """fetchone() that finishes the statement: an unfinished SELECT would keep its read
    snapshot open in WAL mode, and this connection would stop seeing other processes' commits.
    A row that cannot be read (a damaged page) fails as the statement would (`condition_error`)."""

    def fetchone(self) -> Any:
        rows = self.fetchall()
        return rows[0] if rows else None

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            self._fail(exc)

    def _fail(self, exc: sqlite3.DatabaseError) -> NoReturn:
        conn = self.connection
        if not isinstance(conn, Connection):
            raise exc
        conn._raise_condition(exc, False)


_cursor = sqlite3.Connection.cursor


class Connection(sqlite3.Connection):
    """A dex connection: statements whose failure comes from outside dex raise a
    `DatabaseConditionError` (see `condition_error`); each write transaction first checks, at
    most every IDENTITY_CHECK_INTERVAL, that the path still names the file opened."""

    db_path = ":memory:"
    busy_timeout = DEFAULT_BUSY_TIMEOUT
    identity: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened
    sides: dict[str, tuple[int, int] | None] = {}  # its -wal and -shm files, as opened
    replaced: DatabaseReplacedError | None = None  # once seen, every write transaction fails
    failure: DatabaseConditionError | None = None  # the last condition seen
    on_failure: Callable[[DatabaseConditionError], None] | None = None  # told of each, before it raises
    statements = 0  # execute() calls on this connection, BEGIN and COMMIT included (for bench/)
    _checked_at = 0.0

    def cursor(self, factory: Any = Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, sql: str, parameters: Any = ()) -> Any:
        self.statements += 1
        if sql == "BEGIN IMMEDIATE":
            self._check_identity()
        try:
            return _cursor(self, Cursor).execute(sql, parameters)  # not self.cursor(): one Python call less
        except sqlite3.DatabaseError as exc:
            self._raise_condition(exc, sql == "COMMIT")

    def executemany(self, sql: str, parameters: Any) -> Any:
        self.statements += 1
        try:
            return _cursor(self, Cursor).executemany(sql, parameters)
        except sqlite3.DatabaseError as exc:
            self._raise_condition(exc, False)

    def _raise_condition(self, exc: sqlite3.DatabaseError, commit: bool) -> NoReturn:
        failure = condition_error(exc, self.db_path, self.busy_timeout)
        if failure is None:
            raise exc
        if commit and self.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                super().execute("ROLLBACK")  # a failed COMMIT may leave its transaction open
        self._failed(failure)
        raise failure from exc

    def close(self) -> None:
        """Close; if the database file was deleted or replaced meanwhile, also remove this
        connection's -wal and -shm files (SQLite leaves them when the file has moved): beside a
        new file of the same name, SQLite would take that WAL for the new file's and apply it."""
        super().close()
        if self.replaced is not None:
            for side, identity in self.sides.items():
                if _identity_of(side) == identity:
                    with contextlib.suppress(OSError):
                        os.remove(side)

    def _failed(self, failure: DatabaseConditionError) -> None:
        self.failure = failure
        if self.on_failure is not None:
            self.on_failure(failure)

    def check_identity_now(self) -> None:
        """DatabaseReplacedError if the path no longer names the file opened (not waiting for
        the next write's check)."""
        self._checked_at = 0.0
        self._check_identity()

    def _check_identity(self) -> None:
        if self.replaced is not None:
            raise DatabaseReplacedError(str(self.replaced))
        now = time.monotonic()
        if self.identity is None or now - self._checked_at < IDENTITY_CHECK_INTERVAL:
            return
        self._checked_at = now
        if _identity_of(self.db_path) != self.identity:
            self.replaced = DatabaseReplacedError(
                f"the database file {self.db_path} was deleted or replaced while dex ran; nothing more "
                "is written to it (and no new database is created in its place)")
            self._failed(self.replaced)
            raise self.replaced


def condition_error(exc: sqlite3.Error, path: str, busy_timeout: float) -> DatabaseConditionError | None:
    """The plain-words error for a failure that comes from outside dex, or None."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    if name == "SQLITE_FULL" or (name.startswith("SQLITE_IOERR") and _no_space_left(path)):
        return DiskFullError(f"database write failed: disk full ({path})")
    if name.startswith("SQLITE_BUSY"):
        return DatabaseLockedError(f"database is locked by another process (held longer than {busy_timeout:g} s): "
                                   f"{path}")
    if name == "SQLITE_READONLY_DBMOVED":
        return DatabaseReplacedError(f"the database file {path} was deleted or replaced while dex ran")
    if name.startswith("SQLITE_READONLY"):
        return read_only_error(path, _access_problem(path) or "SQLite opened it read-only")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return DamagedDatabaseError(f"the database {path} is damaged: {exc} (truncated or overwritten?)")
    if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(_MISSING_SCHEMA):
        return DamagedDatabaseError(f"the database {path} is damaged: {exc}")
    if name.startswith("SQLITE_IOERR"):
        return DatabaseConditionError(f"I/O error on the database {path}: {exc}")
    return None


# What SQLite says of a table, column or index that dex's schema has and the file lacks: dex
# writes only statements over its own schema, so the file was changed outside dex.
_MISSING_SCHEMA = ("no such table", "no such column", "no such index")


def read_only_error(path: str, why: str) -> ReadOnlyDatabaseError:
    return ReadOnlyDatabaseError(f"database is read-only: cannot write {path} ({why}); commands that only read "
                                 "(list, inspect, doctor, watch) still work")


def _no_space_left(path: str) -> bool:
    try:
        st = os.statvfs(Path(path).parent)
    except OSError:
        return False
    return st.f_bavail == 0


def _identity_of(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


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
        raise DatabaseMissingError(f"no dex database at {path} (run a flow first, or pass --db)")
    create_private(path)


def _access_problem(path: str, writing: bool = True) -> str | None:
    """Why this process cannot open an existing database (for `writing`, or only to read),
    from the file modes (SQLite says only "unable to open database file"), or None. Never
    opens the file (see _check_path)."""
    p = Path(path)
    if not os.access(p, os.R_OK):
        return "permission denied (the file is not readable)"
    if writing and not os.access(p, os.W_OK):
        return "the file is read-only"
    for side in sides(path):
        if side.exists() and not os.access(side, os.R_OK | (os.W_OK if writing else 0)):
            return f"permission denied on {side.name} beside it"
    return _write_problem(path) if writing else None


def _write_problem(path: str) -> str | None:
    """Why this process cannot write an existing database it can read, or None."""
    p = Path(path)
    if not os.access(p, os.W_OK):
        return "the file is read-only"
    for side in sides(path):
        if side.exists() and not os.access(side, os.W_OK):
            return f"{side.name} beside it is read-only"
    if not all(side.exists() for side in sides(path)) and not os.access(p.parent, os.W_OK | os.X_OK):
        return (f"its folder {p.parent} is not writable (SQLite keeps {p.name}-wal and {p.name}-shm "
                "beside the database)")
    return None


def _raise_open_error(path: str, exc: Exception, busy_timeout: float, writing: bool = True) -> NoReturn:
    err = _open_error(path, exc, busy_timeout, writing)
    if err is exc:
        raise err
    raise err from exc


def _open_error(path: str, exc: Exception, busy_timeout: float, writing: bool) -> StoreError:
    """What to say when opening `path` failed with `exc` (an sqlite3 error or a condition)."""
    cause = exc.__cause__ if isinstance(exc, DatabaseConditionError) else exc
    if str(getattr(cause, "sqlite_errorname", "")).startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        # before its header is read, a file of something else and a damaged dex database look alike
        return NotADexDatabaseError(f"{path} is not a dex database, or it is damaged ({cause})")
    problem = _access_problem(path, writing) if path != ":memory:" else None
    if problem is not None:
        if writing and _access_problem(path, writing=False) is None:  # it can be read, not written
            return read_only_error(path, _write_problem(path) or problem)
        return StoreError(f"cannot open the database {path}: {problem}")
    if isinstance(exc, sqlite3.Error):
        exc = condition_error(exc, path, busy_timeout) or exc
    if isinstance(exc, DiskFullError):  # opening to read writes too: SQLite's -wal and -shm files
        return DiskFullError(f"cannot open the database {path}: disk full (SQLite needs room beside it for its "
                             "-wal and -shm files, even to read)")
    if isinstance(exc, StoreError):
        return exc
    return StoreError(f"cannot open the database {path}: {exc}")


def _identify(path: str, busy_timeout: float, uri: str | None = None) -> tuple[Connection, int, int]:
    """Connect (to `uri` if given) and read (application id, schema version) in one snapshot:
    another process may be creating the schema right now."""
    conn: Connection | None = None
    try:
        conn = sqlite3.connect(uri or path, isolation_level=None, check_same_thread=False, timeout=busy_timeout,
                               factory=Connection, uri=uri is not None)
        conn.db_path, conn.busy_timeout = path, busy_timeout
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("BEGIN")
        try:
            app_id = scalar(conn, "PRAGMA application_id")
            version = scalar(conn, "PRAGMA user_version")
            tables = scalar(conn, "SELECT COUNT(*) FROM sqlite_master")
        finally:
            if conn.in_transaction:  # a failed read (no room for the -shm file) ends it: keep its error
                conn.execute("COMMIT")
    except (sqlite3.DatabaseError, DatabaseConditionError) as exc:
        if conn is not None:
            conn.close()
        _raise_open_error(path, exc, busy_timeout, writing=uri is None)
    if tables and app_id != APP_ID:
        conn.close()
        raise NotADexDatabaseError(f"{path} is not a dex database (it has other tables)")
    if version < 0 or (version == 0 and tables and app_id == APP_ID):
        conn.close()  # dex writes its version with its schema, in one transaction
        raise DamagedDatabaseError(f"the database {path} is damaged: its schema version is {version}")
    if version > SCHEMA_VERSION:
        conn.close()
        raise StoreError(f"{path} has schema version {version}, newer than this dex understands "
                         f"({SCHEMA_VERSION}); upgrade dex")
    return conn, app_id, version


def open_connection(path: str, *, create: bool, synchronous: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
                    upgrade: Callable[[], None] | None = None) -> Connection:
    """A connection to the database at `path`. `create`: make a new (private) database if
    there is none. With `upgrade` (what brings an older database up to date), a read-only
    connection that never writes (see `_open_read_only`)."""
    if upgrade is not None:
        return _open_read_only(path, busy_timeout, upgrade)
    _check_path(path, create)
    conn, _, version = _identify(path, busy_timeout)
    try:
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            # Checkpoint every ~40 MiB of WAL instead of every 4 MiB: the same pages are
            # rewritten by many small commits, so fewer checkpoints copy (and, with
            # synchronous=NORMAL, fsync) far less. Commits get about a third cheaper.
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            scalar(conn, "SELECT COUNT(*) FROM sqlite_master")  # a read: the -wal and -shm files exist now
            conn.identity = _identity_of(path)
            conn.sides = {side: _identity_of(side) for side in (f"{path}-wal", f"{path}-shm")}
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        # A 32 MiB page cache (SQLite's default is 2 MiB): 10,000 flows in flight touch rows all
        # over a ~33 MiB file, and each page missed is a pread and a page rebuilt. The drain of
        # 10,000 ThreeStepFlows read 67,139 pages from the OS with the default, 10,861 with this.
        conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        if version == 0:
            _create_schema(conn)
        elif version < SCHEMA_VERSION:
            _migrate(conn, version)
    except (sqlite3.OperationalError, DatabaseConditionError) as exc:
        conn.close()
        _raise_open_error(path, exc, busy_timeout)
    return conn


def _open_read_only(path: str, busy_timeout: float, upgrade: Callable[[], None] | None) -> Connection:
    """Open an existing dex database to read it only. An empty file or one without dex's schema
    is not a dex database: it is left as it is. A database this process can write is opened as
    usual but `query_only` (so its last connection still tidies the -wal and -shm files away),
    after an upgrade if it is from an older dex (reading it needs the new columns); one it cannot
    write, with SQLite's `mode=ro` (`immutable` in a read-only folder: see files.read_only_uri),
    as it is when its version is READS_AS_IS or newer."""
    _check_path(path, create=False)
    if os.path.getsize(path) == 0:
        raise NotADexDatabaseError(f"{path} is not a dex database (it is an empty file)")
    writable = _write_problem(path) is None
    conn, _, version = _identify(path, busy_timeout, None if writable else read_only_uri(path))
    as_is = version == SCHEMA_VERSION or (not writable and READS_AS_IS <= version < SCHEMA_VERSION)
    if as_is and (upgrade is None or not _has_database_offset(conn)):
        conn.execute("PRAGMA query_only = ON")
        return conn
    conn.close()
    if version == 0:
        raise NotADexDatabaseError(f"{path} is not a dex database (it has no dex schema)")
    if not writable or upgrade is None:
        raise read_only_error(path, "it was written by an older dex, and upgrading it means writing it")
    upgrade()
    return _open_read_only(path, busy_timeout, None)


def _has_database_offset(conn: Connection) -> bool:
    """Whether the database still keeps one clock offset for every flow (see Store)."""
    try:
        return scalar(conn, "SELECT 1 FROM meta WHERE key = 'clock_offset'") is not None
    except sqlite3.OperationalError:
        return False


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
    2: (
        "ALTER TABLE steps ADD COLUMN lock_wait TEXT",
        "ALTER TABLE flows ADD COLUMN timeout REAL",
        "ALTER TABLE flows ADD COLUMN timeout_policy TEXT",
        "ALTER TABLE flows ADD COLUMN timeout_at REAL",
        "ALTER TABLE flows ADD COLUMN timeout_handler_options TEXT",
        "ALTER TABLE flows ADD COLUMN start_delay REAL",
        "ALTER TABLE flows ADD COLUMN id_reuse_policy TEXT",
    ),
    3: (),  # 4 adds partial indexes for the scheduler (schema.sql creates them)
    # 5 adds attribute_snapshots (schema.sql creates it). The running attempt (and the one that
    # completed its step) lives on the step's row, the others in ended_attempts (the view
    # `attempts` reads both: store/attempt_rows.py); history is keyed by flow (flows.num);
    # RUNNING steps leave steps_open. history is set aside here, schema.sql creates it anew,
    # and REBUILT copies its rows over.
    4: (
        "ALTER TABLE steps ADD COLUMN heartbeats INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE steps ADD COLUMN stream_writes INTEGER NOT NULL DEFAULT 0",
        "UPDATE steps SET (heartbeats, stream_writes, last_heartbeat_time) = (SELECT a.heartbeats, a.stream_writes, "
        "COALESCE(a.last_heartbeat, steps.last_heartbeat_time) FROM attempts a WHERE a.flow_id = steps.flow_id "
        "AND a.step_execution_id = steps.step_execution_id AND a.attempt = steps.attempt) WHERE status = 'RUNNING'",
        "DELETE FROM attempts WHERE outcome = 'RUNNING'", "ALTER TABLE attempts RENAME TO ended_attempts",
        "DROP INDEX IF EXISTS steps_open", "DROP INDEX IF EXISTS history_by_flow",
        "ALTER TABLE flows ADD COLUMN num INTEGER", "UPDATE flows SET num = rowid",
        "ALTER TABLE history RENAME TO old_history",
    ),
    # 6: SubFlows. A child flow's row names its parent step execution (schema.sql adds the
    # index flows_children); older flows have none.
    5: (
        "ALTER TABLE flows ADD COLUMN parent_flow_id TEXT",
        "ALTER TABLE flows ADD COLUMN parent_step_execution_id TEXT",
    ),
    6: (),  # 7 adds attribute_sync, the Attribute Store outbox (schema.sql creates it)
    # 8: a run's FlowConfig, and the continue-as-new chain it belongs to (transitions/continuing.py)
    7: (
        "ALTER TABLE flows ADD COLUMN flow_config TEXT",
        "ALTER TABLE flows ADD COLUMN first_run_id TEXT",
        "ALTER TABLE flows ADD COLUMN step_numbers TEXT",
    ),
    # 9: a run's flow retry policy and which retry it is (transitions/flow_retry.py); older runs have none
    8: (
        "ALTER TABLE flows ADD COLUMN retry_policy TEXT",
        "ALTER TABLE flows ADD COLUMN retry TEXT",
    ),
    # 10: steps_open's WHERE spelled as equalities (schema.sql creates it again; see there why)
    9: ("DROP INDEX IF EXISTS steps_open",),
}
# After schema.sql has run: what fills the tables a migration set aside, then drops the old ones.
REBUILT: dict[int, tuple[str, ...]] = {
    4: ("INSERT INTO history (seq, flow_id, event_time, type, payload) SELECT (f.num << 24) + ROW_NUMBER() "
        "OVER (PARTITION BY h.flow_id ORDER BY h.event_id), h.flow_id, h.event_time, h.type, h.payload "
        "FROM old_history h JOIN flows f ON f.flow_id = h.flow_id",
        "DROP TABLE old_history"),
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
            for v in range(current, SCHEMA_VERSION):
                for stmt in REBUILT.get(v, ()):
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
