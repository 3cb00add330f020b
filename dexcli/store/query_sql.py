"""A parsed visibility query (dexcli.store.query) compiled to SQL over `flows` and
`search_attributes`: every comparison on an index key becomes an `IN (SELECT flow_id ...)` over
the `(key, text|num, flow_id)` indexes, so an equality reads only the matching index rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from dexcli.store.indexed import prefix_range, step_open
from dexcli.store.query import Compare, Literal, Logical, Node, Not, Query, QueryError

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED")
# Temporal's other ExecutionStatus values, in their spellings: valid in a query (an earlier run of a
# continue-as-new chain is CONTINUED_AS_NEW; no local run is TIMED_OUT)
NO_LOCAL_RUN = {"CONTINUEDASNEW": "CONTINUED_AS_NEW", "TIMEDOUT": "TIMED_OUT"}
SET_OPS = ("=", "!=", "<", "<=", ">", ">=", "BETWEEN", "STARTS_WITH")  # read from index rows as one set
TEXT_TYPES = ("keyword", "keyword_array", "full_text")
BY_FLOW = " INDEXED BY search_by_flow"  # (flow_id, attr_key): one flow's index rows
LOWEST_NUM = -1.7976931348623157e308  # where a flow without the ORDER BY key's number sorts

# ------------------------------------------------------------------------------ SQL ---------
class Builtin(NamedTuple):
    column: str  # over `flows f`
    kind: str  # text, status, time


BUILTINS = {
    "FlowId": Builtin("f.flow_id", "text"), "RunId": Builtin("f.run_id", "text"),
    "FlowType": Builtin("f.flow_type", "text"), "FlowStatus": Builtin("f.status", "status"),
    "StartTime": Builtin("f.start_time", "time"), "CloseTime": Builtin("f.close_time", "time"),
    # the names the server's Temporal visibility has for two of them
    "WorkflowId": Builtin("f.flow_id", "text"), "ExecutionStatus": Builtin("f.status", "status"),
    # the types of the flow's active steps, as its FlowConfig's active_step_search_mode indexes them
    "ActiveStepTypes": Builtin("s.step_type", "active_steps"),
}
# A flow's active steps that ActiveStepTypes sees (the server's StepExecutionCounter): its open step
# executions but the flow timeout's; which of them by the run's ActiveStepSearchMode: none
# (DISABLED), every one (ENABLED_FOR_ALL), or, by default, those that have a wait_for.
_ACTIVE = (f"EXISTS (SELECT 1 FROM steps s WHERE s.flow_id = f.flow_id AND {step_open('s.status')} "
           "AND s.step_type != 'sys:timeout_handler' AND "
           "CASE json_extract(f.flow_config, '$.activeStepSearchMode') WHEN 'ACTIVE_STEP_SEARCH_MODE_DISABLED' THEN 0 "
           "WHEN 'ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL' THEN 1 ELSE s.wait_options IS NOT NULL END{})")
KeyType = Callable[[str], "str | None"]  # an index key's type (IndexType value), None if no flow has it


Dense = Callable[[str, "tuple[Any, ...]"], bool]  # does this index subquery match many rows?


class Compiled(NamedTuple):
    where: str  # over `flows f`
    args: tuple[Any, ...]
    order: str  # the sort expression (one value per flow, never NULL)
    order_args: tuple[Any, ...]
    order_key: str
    descending: bool
    walk: bool = False  # read flows in sort order and test each (no comparison is selective)


def compile_query(query: Query, key_type: KeyType, dense: Dense | None = None) -> Compiled:
    """The query as SQL. Each comparison on an index key is written one of two ways: as the set of
    flows its index rows name (`f.flow_id IN (SELECT flow_id ...)`) when it is selective — one of
    the top-level AND's, and `dense` says it matches few rows — and otherwise as a test of each
    flow (`EXISTS (... AND flow_id = f.flow_id)`); with no selective comparison, the reader walks
    the flows in sort order (`walk`), where a first page is found after a few flows."""
    types: dict[str, str | None] = {}

    def typed(key: str) -> str | None:
        if key not in types:
            types[key] = key_type(key)
        return types[key]

    indexed = [c for c in _comparisons(query.where) if c.key not in BUILTINS]
    selective = {id(c) for c in _conjuncts(query.where) if c.key not in BUILTINS and c.op in SET_OPS
                 and dense is not None and not dense(*_subquery(c, typed(c.key), "set"))}
    compiler = _Compiler(typed, selective)
    where, args = ("1", []) if query.where is None else compiler.node(query.where)
    order, order_args = _order(query, typed)
    return Compiled(where, tuple(args), order, tuple(order_args), query.order_key, query.descending,
                    walk=bool(indexed) and not selective)


def index_keys_of(query: Query) -> list[str]:
    """The index keys a query names (not the built-in keys), in order, once each."""
    keys = [c.key for c in _comparisons(query.where)] + [query.order_key]
    return list(dict.fromkeys(k for k in keys if k not in BUILTINS))


def _comparisons(node: Node | None) -> list[Compare]:
    if isinstance(node, Compare):
        return [node]
    if isinstance(node, Logical):
        return _comparisons(node.left) + _comparisons(node.right)
    return _comparisons(node.operand) if isinstance(node, Not) else []


def _conjuncts(node: Node | None) -> list[Compare]:
    if isinstance(node, Compare):
        return [node]
    if isinstance(node, Logical) and node.op == "AND":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return []


class _Compiler:
    def __init__(self, key_type: KeyType, selective: set[int]) -> None:
        self.key_type = key_type
        self.selective = selective

    def node(self, node: Node) -> tuple[str, list[Any]]:
        if isinstance(node, Logical):
            parts = [self.node(n) for n in _chain(node)]
            return "(" + f" {node.op} ".join(p for p, _ in parts) + ")", [a for _, args in parts for a in args]
        if isinstance(node, Not):
            inner, args = self.node(node.operand)
            return f"(NOT {inner})", args
        if node.op in ("IN", "NOT IN"):
            op, joint = ("=", " OR ") if node.op == "IN" else ("!=", " AND ")
            parts = [self.node(Compare(node.key, op, (v,), node.column)) for v in node.values]
            return "(" + joint.join(p for p, _ in parts) + ")", [a for _, args in parts for a in args]
        builtin = BUILTINS.get(node.key)
        if node.op in ("IS NULL", "IS NOT NULL"):
            if builtin is not None and builtin.kind == "active_steps":
                return (_ACTIVE.format("") if node.op == "IS NOT NULL" else f"(NOT {_ACTIVE.format('')})"), []
            if builtin is not None:
                return f"{builtin.column} {node.op}", []
            has = (f"EXISTS (SELECT 1 FROM search_attributes{BY_FLOW} WHERE key = ? AND "
                   "(text IS NOT NULL OR num IS NOT NULL) AND flow_id = f.flow_id)")
            return (has if node.op == "IS NOT NULL" else f"(NOT {has})"), [node.key]
        if builtin is not None:
            return _builtin(builtin, node)
        return _indexed(node, self.key_type(node.key), "set" if id(node) in self.selective else "test")


def _chain(node: Logical) -> list[Node]:
    """The operands of a run of one operator (`a OR b OR c`), left to right: written as one flat
    group, not as parentheses inside parentheses, which overflow SQLite's parser stack."""
    out: list[Node] = []
    todo: list[Node] = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, Logical) and n.op == node.op:
            todo += [n.right, n.left]
        else:
            out.append(n)
    return out


def _active_steps(c: Compare) -> tuple[str, list[Any]]:
    """ActiveStepTypes, a keyword array: `=` some active step is of that type, `!=` the flow has
    active steps and none is, STARTS_WITH some type starts so."""
    lit = c.values[0]
    if not isinstance(lit.value, str):
        raise QueryError(f"{c.key} is compared with a quoted string", lit.column, lit.text)
    if c.op == "=":
        return _ACTIVE.format(" AND s.step_type = ?"), [lit.value]
    if c.op == "!=":
        return f"({_ACTIVE.format('')} AND NOT {_ACTIVE.format(' AND s.step_type = ?')})", [lit.value]
    if c.op == "STARTS_WITH":
        cond, args = prefix_range("s.step_type", lit.value)
        return _ACTIVE.format(f" AND {cond}"), args
    raise QueryError(f"{c.key} takes =, !=, IN, NOT IN or STARTS_WITH, not {c.op}", c.column)


def _builtin(b: Builtin, c: Compare) -> tuple[str, list[Any]]:
    if b.kind == "active_steps":
        return _active_steps(c)
    lit = c.values[0]
    if b.kind == "status":
        if c.op not in ("=", "!="):
            raise QueryError(f"{c.key} takes =, !=, IN or NOT IN only, not {c.op}", c.column)
        status = str(lit.value).upper() if isinstance(lit.value, str) else ""
        status = NO_LOCAL_RUN.get(status.replace("_", ""), status)
        if status not in STATUSES and status not in NO_LOCAL_RUN.values():
            raise QueryError(f"{c.key} is one of {', '.join(STATUSES)} (any case)", lit.column, lit.text)
        return f"{b.column} {c.op} ?", [status]
    values: list[Any]
    if b.kind == "time":
        if c.op == "STARTS_WITH":
            raise QueryError(f"STARTS_WITH takes a text key, and {c.key} is a time", c.column)
        values = [_seconds(v, c.key) for v in c.values]
    else:
        for v in c.values:
            if not isinstance(v.value, str):
                raise QueryError(f"{c.key} is compared with a quoted string", v.column, v.text)
        values = [v.value for v in c.values]
        if c.op == "STARTS_WITH":
            return prefix_range(b.column, values[0])
    if c.op == "BETWEEN":
        return f"{b.column} BETWEEN ? AND ?", values
    return f"{b.column} {c.op} ?", values


def _seconds(lit: Literal, key: str) -> float:
    """A time literal as epoch seconds: an ISO-8601 string (UTC unless it says) or a number."""
    if isinstance(lit.value, (int, float)) and not isinstance(lit.value, bool):
        return float(lit.value)
    if isinstance(lit.value, str):
        try:
            when = datetime.fromisoformat(lit.value.strip().replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    raise QueryError(f"{key} is compared with a time such as '2026-01-31T12:00:00Z'", lit.column, lit.text)


def _kind_of(lit: Literal, known: str | None) -> str:
    """The index type a comparison reads: the key's own, or, for a key no flow has yet, the literal's."""
    if known is not None:
        return known
    if isinstance(lit.value, bool):
        return "bool"
    return "keyword" if isinstance(lit.value, str) else "double"


_PUNCTUATION = ",.;:!?()[]{}\"'\t\n"
_WORD_BREAKS = str.maketrans(_PUNCTUATION, " " * len(_PUNCTUATION))


def _words(sql: str = "lower(text)") -> str:
    """A FULL_TEXT value with its punctuation turned into spaces, lower-cased, in SQL."""
    for ch in _PUNCTUATION:
        literal = {"'": "''''", "\t": "char(9)", "\n": "char(10)"}.get(ch, f"'{ch}'")
        sql = f"replace({sql}, {literal}, ' ')"
    return sql


_WORDS_SQL = _words()


def _subquery(c: Compare, known: str | None, form: str) -> tuple[str, tuple[Any, ...]]:
    """The index rows a comparison reads, as `SELECT flow_id ...` (form "set") or as a test of
    the flow `f` (form "test"); `!=` reads the rows of the values it excludes."""
    lit = c.values[0]
    kind = _kind_of(lit, known)
    if c.op == "STARTS_WITH" and kind not in TEXT_TYPES[:2]:
        raise QueryError(f"STARTS_WITH takes a KEYWORD or KEYWORD_ARRAY key; {c.key} is {kind.upper()}", c.column)
    column, value = _index_value(c, lit, kind)
    args: list[Any]
    if kind == "full_text":
        if c.op not in ("=", "!="):
            raise QueryError(f"{c.key} is a FULL_TEXT key: it takes = or != only, not {c.op}", c.column)
        words = " ".join(str(value).lower().translate(_WORD_BREAKS).split())
        escaped = words.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        test, args = f"' ' || {_WORDS_SQL} || ' ' LIKE ? ESCAPE '\\' AND text IS NOT NULL", [f"% {escaped} %"]
    elif c.op == "STARTS_WITH":
        test, args = prefix_range(column, value)
    elif c.op == "BETWEEN":
        test, args = f"{column} BETWEEN ? AND ?", [value, _index_value(c, c.values[1], kind)[1]]
    else:
        test, args = f"{column} {'=' if c.op == '!=' else c.op} ?", [value]
    if form == "set":
        return f"SELECT flow_id FROM search_attributes WHERE key = ? AND {test}", (c.key, *args)
    # a test reads one flow's rows: an equality has its own index entry; anything else would
    # make SQLite walk the key's whole range, so it reads the flow's rows instead
    exact = c.op in ("=", "!=") and kind != "full_text"
    return (f"SELECT 1 FROM search_attributes{'' if exact else BY_FLOW} WHERE key = ? AND {test} "
            "AND flow_id = f.flow_id"), (c.key, *args)


def _indexed(c: Compare, known: str | None, form: str) -> tuple[str, list[Any]]:
    sql, args = _subquery(c, known, form)
    match = f"f.flow_id IN ({sql})" if form == "set" else f"EXISTS ({sql})"
    if c.op != "!=":
        return match, list(args)
    column = "text" if _kind_of(c.values[0], known) in TEXT_TYPES else "num"
    has = (f"EXISTS (SELECT 1 FROM search_attributes{BY_FLOW} WHERE key = ? AND {column} IS NOT NULL "
           "AND flow_id = f.flow_id)")
    return f"({has} AND NOT {match})", [c.key, *args]


def _index_value(c: Compare, lit: Literal, kind: str) -> tuple[str, Any]:
    """The column a comparison on an index key reads, and the literal as that column holds it."""
    if kind in TEXT_TYPES:
        if not isinstance(lit.value, str):
            raise QueryError(f"{c.key} is a {kind.upper()} key: compare it with a quoted string",
                             lit.column, lit.text)
        return "text", lit.value
    if kind == "datetime":
        return "num", _seconds(lit, c.key)
    if kind == "bool":
        if not isinstance(lit.value, bool):
            raise QueryError(f"{c.key} is a BOOL key: compare it with true or false", lit.column, lit.text)
        if c.op not in ("=", "!="):
            raise QueryError(f"{c.key} is a BOOL key: it takes = or != only, not {c.op}", c.column)
        return "num", 1.0 if lit.value else 0.0
    if isinstance(lit.value, bool) or not isinstance(lit.value, (int, float)):
        raise QueryError(f"{c.key} is a{'n' if kind == 'int' else ''} {kind.upper()} key: compare it with a number",
                         lit.column, lit.text)
    return "num", float(lit.value)


def _order(query: Query, key_type: KeyType) -> tuple[str, list[Any]]:
    builtin = BUILTINS.get(query.order_key)
    if builtin is not None and builtin.kind == "active_steps":
        raise QueryError(f"ORDER BY {query.order_key}: a keyword array does not sort")
    if builtin is not None:
        if builtin.column == "f.close_time":
            return f"COALESCE(f.close_time, {LOWEST_NUM!r})", []
        return builtin.column, []
    kind = key_type(query.order_key)  # a key no flow has yet sorts every flow alike (by flow id)
    if kind in TEXT_TYPES:
        return (f"COALESCE((SELECT MIN(s.text) FROM search_attributes s{BY_FLOW} WHERE s.key = ? "
                "AND s.flow_id = f.flow_id AND s.text IS NOT NULL), '')"), [query.order_key]
    return (f"COALESCE((SELECT MIN(s.num) FROM search_attributes s{BY_FLOW} WHERE s.key = ? "
            f"AND s.flow_id = f.flow_id AND s.num IS NOT NULL), {LOWEST_NUM!r})"), [query.order_key]
