"""The reads clients make of attributes: search (the visibility query language, paged) and
one attribute's current value, for waiting on it.

A page is read by keyset: the page token carries the last flow's sort value and flow id, so
the next page starts right after it whatever was written since (no OFFSET to re-count). A
token is opaque (base64 JSON) and names the ORDER BY it belongs to.
"""

from __future__ import annotations

import base64
import binascii
import json
import sqlite3
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, NamedTuple

from dexcli.store.query import Query, QueryError, parse
from dexcli.store.query_sql import BUILTINS, Compiled, compile_query, index_keys_of
from dexcli.store.records import FLOW_COLUMNS, FlowRecord, db_of, flow_record

if TYPE_CHECKING:
    from dexcli.store.store import Store

# FlowId, RunId, FlowType, FlowStatus, StartTime, CloseTime, WorkflowId, ExecutionStatus, ActiveStepTypes
BUILTIN_KEYS = tuple(BUILTINS)
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
DENSE_MATCHES = 2000  # an index comparison matching this many flows is not selective
# what SQLite says when a statement passes one of its limits (the parser's bounds keep queries
# under them; this names the query, not the database, if one still does)
_TOO_COMPLEX = ("parser stack overflow", "Expression tree is too large", "too many SQL variables",
                "too many terms in compound SELECT")
_FLOW_COLUMNS = ", ".join(f"f.{c}" for c in FLOW_COLUMNS.split(", "))


class SearchHit(NamedTuple):
    flow: FlowRecord
    indexed: dict[str, str]  # index key -> the attribute's value (JSON)


class SearchPage(NamedTuple):
    hits: list[SearchHit]
    next_page_token: str  # "" on the last page


def search_flows(store: Store, query: str, page_size: int = 0, page_token: str = "",
                 declared: Callable[[], Collection[str]] | None = None,
                 include_continued_as_new: bool = False) -> SearchPage:
    """One page of the flows `query` matches, in its order. `page_size` 0 means 100; at most 1000.
    Raises QueryError for a query that does not parse, a token from another query, or (given
    `declared`, which names the index keys the caller's flows declare, asked only when a key is
    held by no flow) a key that is neither built in, declared, nor held: the server refuses a
    search attribute it does not have; it does not match nothing. The earlier runs of a
    continue-as-new chain (CONTINUED_AS_NEW) are left out unless `include_continued_as_new`
    (which adds them; the query's own terms still apply)."""
    if page_size < 0:
        raise ValueError("search page size must not be negative")
    size = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    tree = parse(query)

    def read(tx: Any) -> SearchPage:
        if declared is not None:
            _refuse_unknown(tx.c, tree, declared)
        return _page(tx.c, tree_sql(tx.c, tree), size, page_token, include_continued_as_new)

    return store.read(read)


def _refuse_unknown(c: sqlite3.Connection, tree: Query, declared: Callable[[], Collection[str]]) -> None:
    unseen = [k for k in index_keys_of(tree) if key_type(c, k) is None]
    if not unseen:
        return
    names = set(declared())
    unknown = [k for k in unseen if k not in names]
    if unknown:
        held = {str(r[0]) for r in c.execute("SELECT DISTINCT key FROM search_attributes")}
        known = [*BUILTIN_KEYS, *sorted(held | names)]
        raise QueryError(f"there is no search key {unknown[0]!r}; the keys are: {', '.join(known)}")


def tree_sql(c: sqlite3.Connection, tree: Query) -> Compiled:
    def dense(sql: str, args: tuple[Any, ...]) -> bool:
        """Whether an index subquery names many flows (counting stops there): then finding a page by
        walking the flows in order beats collecting and sorting every match."""
        count = c.execute(f"SELECT count(*) FROM ({sql} LIMIT {DENSE_MATCHES})", args).fetchone()[0]
        return bool(count >= DENSE_MATCHES)

    return compile_query(tree, lambda key: key_type(c, key), dense)


def key_type(c: sqlite3.Connection, key: str) -> str | None:
    """An index key's type, from any row of it (each probe reads one entry of an index)."""
    for column in ("text", "num"):
        row = c.execute(f"SELECT type FROM search_attributes WHERE key = ? AND {column} IS NOT NULL LIMIT 1",
                        (key,)).fetchone()
        if row is not None:
            return str(row[0])
    return None


def _page(c: sqlite3.Connection, q: Compiled, size: int, token: str, continued: bool = False) -> SearchPage:
    direction = "DESC" if q.descending else "ASC"
    source = "flows f INDEXED BY flows_by_start" if q.walk and q.order_key == "StartTime" else "flows f"
    runs = "" if continued else " AND f.status != 'CONTINUED_AS_NEW'"
    sql = f"SELECT {_FLOW_COLUMNS}, {q.order} AS sort_value FROM {source} WHERE ({q.where}){runs}"
    args: list[Any] = [*q.order_args, *q.args]
    if token:
        after_value, after_id = _read_token(token, q)
        sql += f" AND ({q.order}, f.flow_id) {'<' if q.descending else '>'} (?, ?)"
        args += [*q.order_args, after_value, after_id]
    sql += f" ORDER BY sort_value {direction}, f.flow_id {direction} LIMIT ?"
    try:
        rows = c.execute(sql, (*args, size + 1)).fetchall()
    except sqlite3.OperationalError as e:
        if not any(m in str(e) for m in _TOO_COMPLEX):
            raise
        raise QueryError(f"too complex for SQLite ({e}): use fewer comparisons or less nesting") from None
    flows = [flow_record(r[:-1], db_of(c)) for r in rows[:size]]
    indexed = _indexed_values(c, [f.flow_id for f in flows])
    next_token = _token(q, rows[size - 1][-1], flows[-1].flow_id) if len(rows) > size else ""
    return SearchPage([SearchHit(f, indexed.get(f.flow_id, {})) for f in flows], next_token)


def _indexed_values(c: sqlite3.Connection, flow_ids: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for i in range(0, len(flow_ids), 500):
        chunk = flow_ids[i:i + 500]
        for flow_id, key, value in c.execute(
                "SELECT DISTINCT s.flow_id, s.key, a.value FROM search_attributes s JOIN attributes a "
                "ON a.flow_id = s.flow_id AND a.key = s.attr_key "
                f"WHERE s.flow_id IN ({','.join('?' for _ in chunk)}) ORDER BY s.attr_key", chunk):
            out.setdefault(flow_id, {})[key] = value
    return out


def _token(q: Compiled, value: Any, flow_id: str) -> str:
    text = json.dumps([q.order_key, q.descending, value, flow_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _read_token(token: str, q: Compiled) -> tuple[Any, str]:
    try:
        key, descending, value, flow_id = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError, binascii.Error) as e:
        raise QueryError("the page token is not one dex gave out") from e
    if key != q.order_key or descending != q.descending or not isinstance(flow_id, str):
        raise QueryError("the page token belongs to a query with another ORDER BY")
    return value, flow_id


def attribute_value(store: Store, flow_id: str, key: str) -> str | None:
    """The committed value (JSON) of one attribute (`name`, or `name/<instance>`), or None."""
    def read(tx: Any) -> str | None:
        row = tx.c.execute("SELECT value FROM attributes WHERE flow_id = ? AND key = ?", (flow_id, key)).fetchone()
        return None if row is None else str(row[0])

    return store.read(read)
