"""Attribute Store targets: the SQL tables synced attributes are projected into, as on a Dex
server (docs/content/production/attribute-store.mdx of the Dex repository).

A store is a table the user owns: dex never creates or migrates it. It must have exactly one
primary-key column that takes text (the flow id goes there); every other NOT NULL column needs
a default or must be generated, so a row can be inserted with only some columns. An attribute's
physical key (`name`, or `name/<instance>` for an AttributeMap instance) must be the name of a
column. A projection is an upsert of the flow's row that sets the columns of the values given;
None is SQL NULL. A value a column cannot take (no such column, the primary key, a wrong type,
too long, NULL for a NOT NULL column) is skipped with the reason, the others are written.

Two kinds: `sqlite` (a database file that must exist; never the dex database itself) and
`postgres` (psycopg 3, imported only when such a store is opened). The table is described when
the store is opened; `refresh` describes it again (a column added later is then seen).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from dexcli.store.errors import StoreError

KINDS = ("sqlite", "postgres")
CONNECT_TIMEOUT_SECONDS = 5


class AttributeStoreError(StoreError):
    """An Attribute Store cannot be used: unreachable, no such table, a table dex cannot write
    (exit 5, the environment). The message is one line and names the store."""


@dataclass(frozen=True)
class StoreSettings:
    """One store of dex.toml's [attribute_store.stores.NAME]."""

    name: str
    kind: str  # sqlite | postgres
    table_name: str  # table, or schema.table (postgres)
    path: str | None = None  # sqlite: the database file
    dsn: str | None = None  # postgres: the connection string (never shown: it may hold a password)

    @property
    def where(self) -> str:
        """Where the store is, for messages (a postgres DSN without its password)."""
        if self.kind == "sqlite":
            return str(self.path)
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", self.dsn or "")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # lower-case declared/data type
    nullable: bool
    max_length: int | None = None
    precision: int | None = None
    scale: int | None = None


@dataclass(frozen=True)
class Skipped:
    key: str
    reason: str


class Target(Protocol):
    settings: StoreSettings

    def upsert(self, flow_id: str, values: Mapping[str, Any]) -> list[Skipped]: ...

    def refresh(self) -> None: ...

    def close(self) -> None: ...


def open_target(settings: StoreSettings) -> Target:
    """Connect and describe the table; AttributeStoreError (one line) when that fails."""
    if settings.kind == "sqlite":
        return SqliteTarget(settings)
    if settings.kind == "postgres":
        return PostgresTarget(settings)
    raise AttributeStoreError(f"Attribute Store {settings.name!r}: unknown type {settings.kind!r}")


# ------------------------------------------------------------------------- conversions ----
_TEXT = ("char", "clob", "text", "varchar", "character", "string")
_INT_RANGES = {"smallint": 2**15, "int2": 2**15, "integer": 2**31, "int": 2**31, "int4": 2**31,
               "mediumint": 2**23, "tinyint": 2**7}


def _temporal(col: Column, kind: str) -> bool:
    """A column of datetimes: PostgreSQL timestamptz (as Dex); SQLite a declared DATETIME,
    TIMESTAMP or DATE type (stored as RFC 3339 text)."""
    if kind == "postgres":
        return col.type == "timestamp with time zone"
    return "date" in col.type or "timestamp" in col.type


def _parse_time(value: Any) -> datetime:
    if isinstance(value, bool):
        raise ValueError("a bool is not a datetime")
    if isinstance(value, (int, float)):
        from datetime import UTC
        return datetime.fromtimestamp(value, tz=UTC)
    if not isinstance(value, str):
        raise ValueError("datetime must be an RFC 3339 string or epoch seconds")
    when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError("datetime must name its time zone (RFC 3339)")
    return when


def convert(col: Column, value: Any, kind: str) -> Any:
    """The SQL parameter for `value` (a JSON value) in `col`, or ValueError saying why not (the
    type contract of Dex's Attribute Store, for SQLite by declared type)."""
    t = col.type
    if value is None:
        if not col.nullable:
            raise ValueError("column is not nullable")
        return None
    if _temporal(col, kind) and not isinstance(value, bool):
        when = _parse_time(value)
        return when if kind == "postgres" else when.isoformat()
    if isinstance(value, bool):
        if t in ("boolean", "bool"):
            return value if kind == "postgres" else int(value)
        raise ValueError("column does not take a bool")
    if isinstance(value, int):
        if t in ("bigint", "int8") or (kind == "sqlite" and "int" in t):
            if kind == "postgres" and not -2**63 <= value < 2**63:
                raise ValueError("int out of the column's range")
            return value
        if t in _INT_RANGES:
            if not -_INT_RANGES[t] <= value < _INT_RANGES[t]:
                raise ValueError("int out of the column's range")
            return value
        if t in ("numeric", "decimal"):
            if col.scale:
                raise ValueError("column has a scale: it does not take an int")
            if col.precision is not None and len(str(abs(value))) > col.precision:
                raise ValueError("int has more digits than the column's precision")
            return value
        if kind == "sqlite" and t in ("real", "double", "double precision", "float", "numeric"):
            return value
        raise ValueError("column does not take an int")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("column does not take NaN or infinity")
        if t in ("real", "double precision", "double", "float", "float4", "float8", "numeric", "decimal"):
            return value
        raise ValueError("column does not take a double")
    if isinstance(value, str):
        if not any(x in t for x in _TEXT) or t in ("json", "jsonb"):
            raise ValueError("column does not take text")
        if col.max_length is not None and len(value) > col.max_length:
            raise ValueError("text longer than the column")
        return value
    if isinstance(value, (dict, list)):
        if t in ("json", "jsonb"):
            return json.dumps(value, separators=(",", ":"))
        raise ValueError("column does not take JSON")
    raise ValueError(f"unsupported value {type(value).__name__}")


def _split_table(settings: StoreSettings) -> tuple[str | None, str]:
    parts = settings.table_name.split(".")
    if not 1 <= len(parts) <= 2 or any(not p or "\0" in p for p in parts):
        raise AttributeStoreError(f"Attribute Store {settings.name!r}: table_name must be table or schema.table, "
                                  f"got {settings.table_name!r}")
    return (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _check_shape(settings: StoreSettings, columns: dict[str, Column], keys: list[str],
                 required: list[str]) -> str:
    """The primary-key column, after Dex's checks of the table's shape."""
    name = f"Attribute Store {settings.name!r} ({settings.where}, table {settings.table_name})"
    if not columns:
        raise AttributeStoreError(f"{name}: the table does not exist or has no columns (dex never creates it)")
    if len(keys) != 1:
        raise AttributeStoreError(f"{name}: the table must have exactly one primary-key column, it has {len(keys)}")
    pk = columns[keys[0]]
    if not any(x in pk.type for x in _TEXT):
        raise AttributeStoreError(f"{name}: primary-key column {pk.name!r} ({pk.type}) cannot hold flow ids (text)")
    blocking = [c for c in required if c != pk.name]
    if blocking:
        raise AttributeStoreError(f"{name}: column {blocking[0]!r} is NOT NULL without a default: a row could not "
                                  "be inserted with only some columns")
    return pk.name


class _SqlTarget:
    settings: StoreSettings
    kind: str
    columns: dict[str, Column]
    primary_key: str
    qualified: str

    def _describe(self) -> None:
        raise NotImplementedError

    def refresh(self) -> None:
        self._describe()

    def _statement(self, flow_id: str, values: Mapping[str, Any]) -> tuple[str, list[Any], list[Skipped]]:
        skipped: list[Skipped] = []
        cols: list[str] = []
        args: list[Any] = [flow_id]
        for key in sorted(values):
            col = self.columns.get(key)
            if col is None:
                skipped.append(Skipped(key, "no such column"))
                continue
            if key == self.primary_key:
                skipped.append(Skipped(key, "the primary key holds the flow id"))
                continue
            try:
                args.append(convert(col, values[key], self.kind))
            except ValueError as exc:
                skipped.append(Skipped(key, str(exc)))
                continue
            cols.append(key)
        if not cols:
            return "", [], skipped
        mark = "%s" if self.kind == "postgres" else "?"
        names = ", ".join(_quote(c) for c in [self.primary_key, *cols])
        sets = ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in cols)
        sql = (f"INSERT INTO {self.qualified} ({names}) VALUES ({', '.join(mark for _ in args)}) "
               f"ON CONFLICT ({_quote(self.primary_key)}) DO UPDATE SET {sets}")
        return sql, args, skipped

    def _fail(self, what: str, exc: Exception) -> AttributeStoreError:
        text = " ".join(str(exc).split()) or type(exc).__name__
        return AttributeStoreError(f"Attribute Store {self.settings.name!r} ({self.settings.where}): {what}: {text}")


class SqliteTarget(_SqlTarget):
    kind = "sqlite"

    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings
        schema, table = _split_table(settings)
        self.table = table
        self.qualified = (f"{_quote(schema)}." if schema else "") + _quote(table)
        path = Path(settings.path or "")
        if not path.is_file():
            raise AttributeStoreError(f"Attribute Store {settings.name!r}: no SQLite database at {path} "
                                      "(dex never creates the store: create it and its table)")
        try:
            self.conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=30,
                                        isolation_level=None, check_same_thread=False)
            self._describe()
        except sqlite3.Error as exc:
            raise self._fail("cannot open it", exc) from None

    def _describe(self) -> None:
        rows = self.conn.execute(f"PRAGMA table_xinfo({_quote(self.table)})").fetchall()
        columns: dict[str, Column] = {}
        keys: list[tuple[int, str]] = []
        required = []
        for _cid, name, decl, notnull, default, pk, hidden in rows:
            t = (decl or "").lower()
            m = re.match(r"\s*([a-z ]+?)\s*\((\d+)\)", t)
            length = int(m.group(2)) if m and any(x in m.group(1) for x in _TEXT) else None
            columns[name] = Column(name, (m.group(1) if m else t).strip(), not notnull, length)
            if pk:
                keys.append((pk, name))
            if notnull and default is None and not pk and not hidden:
                required.append(name)
        self.columns = columns
        self.primary_key = _check_shape(self.settings, columns, [n for _, n in sorted(keys)], required)

    def upsert(self, flow_id: str, values: Mapping[str, Any]) -> list[Skipped]:
        sql, args, skipped = self._statement(flow_id, values)
        if sql:
            try:
                self.conn.execute(sql, args)
            except sqlite3.Error as exc:
                raise self._fail("upsert failed", exc) from None
        return skipped

    def close(self) -> None:
        self.conn.close()


class PostgresTarget(_SqlTarget):
    kind = "postgres"

    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings
        try:
            import psycopg
        except ImportError:
            raise AttributeStoreError(f"Attribute Store {settings.name!r} is a postgres store and psycopg is not "
                                      "installed: pip install 'dexcli[postgres]'") from None
        self._psycopg = psycopg
        schema, table = _split_table(settings)
        try:
            self.conn = psycopg.connect(settings.dsn or "", autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
        except psycopg.Error as exc:
            raise self._fail("cannot connect", exc) from None
        try:
            if schema is None:
                row = self.conn.execute("SELECT current_schema()").fetchone()
                schema = row[0] if row else None
            if not schema:
                raise AttributeStoreError(f"Attribute Store {settings.name!r}: the database has no current schema")
            self.schema, self.table = schema, table
            self.qualified = f"{_quote(schema)}.{_quote(table)}"
            self._describe()
        except psycopg.Error as exc:
            self.conn.close()
            raise self._fail("cannot describe the table", exc) from None
        except AttributeStoreError:
            self.conn.close()
            raise

    def _describe(self) -> None:
        rows = self.conn.execute(
            "SELECT column_name, data_type, is_nullable, character_maximum_length, numeric_precision, "
            "numeric_scale, column_default, is_identity, is_generated FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (self.schema, self.table)).fetchall()
        columns: dict[str, Column] = {}
        required = []
        for name, dtype, nullable, length, precision, scale, default, identity, generated in rows:
            columns[name] = Column(name, dtype.lower(), nullable == "YES", length, precision, scale)
            if nullable != "YES" and default is None and identity != "YES" and generated != "ALWAYS":
                required.append(name)
        keys = [r[0] for r in self.conn.execute(
            "SELECT kcu.column_name FROM information_schema.table_constraints tc "
            "JOIN information_schema.key_column_usage kcu ON tc.constraint_name = kcu.constraint_name "
            "AND tc.table_schema = kcu.table_schema AND tc.table_name = kcu.table_name "
            "WHERE tc.constraint_type = 'PRIMARY KEY' AND tc.table_schema = %s AND tc.table_name = %s "
            "ORDER BY kcu.ordinal_position", (self.schema, self.table)).fetchall()]
        self.columns = columns
        self.primary_key = _check_shape(self.settings, columns, keys, required)

    def upsert(self, flow_id: str, values: Mapping[str, Any]) -> list[Skipped]:
        sql, args, skipped = self._statement(flow_id, values)
        if sql:
            try:
                self.conn.execute(sql, args)
            except self._psycopg.Error as exc:
                if self.conn.closed or self.conn.broken:
                    self._reconnect()
                raise self._fail("upsert failed", exc) from None
        return skipped

    def _reconnect(self) -> None:
        with contextlib.suppress(self._psycopg.Error):  # if not, the next upsert tries again
            self.conn = self._psycopg.connect(self.settings.dsn or "", autocommit=True,
                                              connect_timeout=CONNECT_TIMEOUT_SECONDS)

    def close(self) -> None:
        self.conn.close()
