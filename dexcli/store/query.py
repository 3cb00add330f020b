"""Dex's visibility query language, parsed and compiled to SQL over `flows` and `search_attributes`.

    OrderStatus = 'paid' AND (FlowStatus = 'Running' OR Amount >= 100) ORDER BY StartTime DESC

- Comparisons `key op value` with `=`, `!=` (or `<>`), `<`, `<=`, `>`, `>=`; `key IN (v, ...)`,
  `key NOT IN (v, ...)`, `key BETWEEN low AND high` (both included), `key STARTS_WITH 'prefix'`,
  `key IS NULL` and `key IS NOT NULL` (the operators the server's Temporal visibility takes).
  Keys are the built-ins (`FlowId`, `RunId`, `FlowType`, `FlowStatus`, `StartTime`, `CloseTime`,
  and Temporal's names `WorkflowId` and `ExecutionStatus` for `FlowId` and `FlowStatus`) or an
  attribute's index key (`AttributeIndex.index_key`, default its name); a key in backticks may
  hold any character but a backtick. A key that is neither is an error, as on the server (the
  reader, dexcli.store.search, knows which keys exist).
- Values: strings in single or double quotes (a doubled quote, or a backslash, escapes the
  quote), numbers, `true`/`false`; times (`StartTime`, `CloseTime`, DATETIME keys) as quoted
  ISO-8601 strings (UTC when they name no zone) or epoch seconds. `FlowStatus` values are
  case-insensitive (`'Running'`, `'RUNNING'`).
- `NOT` binds tightest, then `AND`, then `OR`; parentheses group. Keywords are case-insensitive.
- `ORDER BY key [ASC|DESC]`, default `StartTime DESC`; ties are broken by flow id. Flows without
  the key's value sort lowest.
- Bounds: at most MAX_COMPARISONS comparisons (each value of an `IN` counts as one) and
  MAX_NESTING parentheses and `NOT`s inside one another, so that the SQL stays within SQLite's
  expression depth and parser stack and the parser within Python's recursion limit.

What a comparison on an index key means: `=` and the orderings match a flow that has a value
satisfying it (for a KEYWORD_ARRAY, any element); `K != v` matches a flow that has K and no
value equal to v (so `NOT K = v` also matches flows without K), and `K NOT IN (...)` one that has
K and none of the values; `K IS NULL` matches a flow without a value of K. FULL_TEXT keys take `=` and
`!=` only: `=` matches when the value's words (split at spaces and punctuation) contain the
literal's words, adjacent and in order, ignoring ASCII case (a simple word match, not a
stemming full-text engine).

`parse` (here) is pure; `compile_query` (dexcli.store.query_sql) needs the type of each index
key (the caller looks it up), and every comparison becomes an `IN (SELECT flow_id ...)` over
the `(key, text|num, flow_id)` indexes, so an equality reads only the matching index rows (the
reader, dexcli.store.search, picks between starting from those rows and walking flows in
StartTime order).
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from dexcli.store.errors import StoreError

KEYWORDS = {"AND", "OR", "NOT", "ORDER", "BY", "ASC", "DESC", "TRUE", "FALSE", "IN", "BETWEEN", "STARTS_WITH", "IS",
            "NULL"}
OPERATORS = ("!=", "<>", "<=", ">=", "=", "<", ">")
MAX_COMPARISONS = 200
MAX_NESTING = 8  # SQLite's parser stack (100 entries) holds about 10 levels of the SQL this compiles to


class QueryError(StoreError):
    """A query that does not parse or compare: what was expected, and at which column (1-based)."""

    exit_code = 2

    def __init__(self, message: str, column: int | None = None, found: str | None = None, hint: str = "") -> None:
        self.message, self.column, self.found = message, column, found
        where = "" if column is None else f" at column {column}"
        super().__init__(f"query: {message}{where}" + (f": found {found}" if found else "") +
                         (f" ({hint})" if hint else ""))


# ------------------------------------------------------------------------------ tokens ------
class Token(NamedTuple):
    kind: str  # IDENT KEYWORD STRING NUMBER OP ( ) , END
    text: str
    value: Any
    column: int

    def shown(self) -> str:
        return "the end of the query" if self.kind == "END" else repr(self.text)


_SPACE = re.compile(r"\s+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    while i < len(text):
        m = _SPACE.match(text, i)
        if m:
            i = m.end()
            continue
        token, i = _token_at(text, i)
        tokens.append(token)
    tokens.append(Token("END", "", None, len(text) + 1))
    return tokens


def _token_at(text: str, i: int) -> tuple[Token, int]:
    ch, col = text[i], i + 1
    if ch in "'\"":
        return _string(text, i)
    if ch == "`":
        end = text.find("`", i + 1)
        if end < 0 or end == i + 1:
            raise QueryError("expected a key name and a closing backtick", col)
        return Token("IDENT", text[i:end + 1], text[i + 1:end], col), end + 1
    if ch in "(),":
        return Token(ch, ch, ch, col), i + 1
    for op in OPERATORS:
        if text.startswith(op, i):
            return Token("OP", op, "!=" if op == "<>" else op, col), i + len(op)
    m = _NUMBER.match(text, i)
    if m:
        number = float(m.group())
        if not math.isfinite(number):
            raise QueryError("a number out of range", col, m.group()[:40])
        value = int(number) if re.fullmatch(r"-?\d+", m.group()) else number
        return Token("NUMBER", m.group(), value, col), m.end()
    m = _IDENT.match(text, i)
    if m:
        word = m.group()
        if word.upper() in KEYWORDS:
            return Token("KEYWORD", word, word.upper(), col), m.end()
        return Token("IDENT", word, word, col), m.end()
    raise QueryError("unexpected character", col, repr(ch))


def _string(text: str, i: int) -> tuple[Token, int]:
    quote, j, out = text[i], i + 1, []
    while j < len(text):
        ch = text[j]
        if ch == "\\" and j + 1 < len(text):
            out.append(text[j + 1])
            j += 2
        elif ch == quote and text.startswith(quote * 2, j):
            out.append(quote)
            j += 2
        elif ch == quote:
            return Token("STRING", text[i:j + 1], "".join(out), i + 1), j + 1
        else:
            out.append(ch)
            j += 1
    raise QueryError(f"expected a closing {quote} for the string starting", i + 1)


# ------------------------------------------------------------------------------ syntax ------
class Literal(NamedTuple):
    value: Any  # str, int, float or bool
    column: int
    text: str


class Compare(NamedTuple):
    key: str
    op: str  # = != < <= > >= IN, NOT IN, BETWEEN, STARTS_WITH, IS NULL, IS NOT NULL
    values: tuple[Literal, ...]  # one; several for (NOT) IN; two for BETWEEN; none for IS (NOT) NULL
    column: int


class Logical(NamedTuple):
    op: str  # AND, OR
    left: Node
    right: Node


class Not(NamedTuple):
    operand: Node


Node = Compare | Logical | Not


class Query(NamedTuple):
    where: Node | None
    order_key: str = "StartTime"
    descending: bool = True
    order_column: int = 0


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = tokenize(text)
        self.i = 0
        self.nesting = 0
        self.comparisons = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def take(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def is_keyword(self, *words: str) -> bool:
        return self.tok.kind == "KEYWORD" and self.tok.value in words

    def fail(self, expected: str, hint: str = "") -> QueryError:
        return QueryError(f"expected {expected}", self.tok.column, self.tok.shown(), hint)

    def query(self) -> Query:
        where = None if self.tok.kind == "END" or self.is_keyword("ORDER") else self.disjunction()
        order = Query(where)
        if self.is_keyword("ORDER"):
            self.take()
            if not self.is_keyword("BY"):
                raise self.fail("BY after ORDER")
            self.take()
            if self.tok.kind != "IDENT":
                raise self.fail("a key to order by")
            key = self.take()
            descending = False
            if self.is_keyword("ASC", "DESC"):
                descending = self.take().value == "DESC"
            order = Query(where, key.value, descending, key.column)
        if self.tok.kind != "END":
            raise self.fail("AND, OR, ORDER BY or the end of the query")
        return order

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.is_keyword("OR"):
            self.take()
            node = Logical("OR", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.is_keyword("AND"):
            self.take()
            node = Logical("AND", node, self.negation())
        return node

    def negation(self) -> Node:
        if not self.is_keyword("NOT") and self.tok.kind != "(":
            return self.comparison()
        self.nesting += 1
        if self.nesting > MAX_NESTING:
            raise QueryError(f"more than {MAX_NESTING} parentheses and NOTs inside one another", self.tok.column)
        if self.take().kind != "(":
            node: Node = Not(self.negation())
        else:
            node = self.disjunction()
            if self.tok.kind != ")":
                raise self.fail("a closing parenthesis")
            self.take()
        self.nesting -= 1
        return node

    def counted(self, n: int, column: int) -> None:
        self.comparisons += n
        if self.comparisons > MAX_COMPARISONS:
            raise QueryError(f"more than {MAX_COMPARISONS} comparisons (each IN value counts as one)", column)

    def comparison(self) -> Node:
        if self.tok.kind != "IDENT":
            raise self.fail("a key", "a name such as FlowStatus or OrderStatus")
        key = self.take()
        op = "IN"
        if self.is_keyword("NOT"):
            self.take()
            if not self.is_keyword("IN"):
                raise self.fail("IN after NOT", "key NOT IN (v, ...); to negate a comparison, put NOT before its key")
            op = "NOT IN"
        if self.is_keyword("IN"):
            self.take()
            values = self.value_list()
            self.counted(len(values), key.column)
            return Compare(key.value, op, values, key.column)
        if self.is_keyword("IS"):
            self.take()
            negated = self.is_keyword("NOT")
            if negated:
                self.take()
            if not self.is_keyword("NULL"):
                raise self.fail("NULL", "key IS NULL or key IS NOT NULL")
            self.take()
            self.counted(1, key.column)
            return Compare(key.value, "IS NOT NULL" if negated else "IS NULL", (), key.column)
        if self.is_keyword("BETWEEN"):
            self.take()
            low = self.value()
            if not self.is_keyword("AND"):
                raise self.fail("AND between the two values of BETWEEN")
            self.take()
            self.counted(2, key.column)
            return Compare(key.value, "BETWEEN", (low, self.value()), key.column)
        if self.is_keyword("STARTS_WITH"):
            self.take()
            self.counted(1, key.column)
            return Compare(key.value, "STARTS_WITH", (self.value(),), key.column)
        if self.tok.kind != "OP":
            raise self.fail("an operator", "=, !=, <, <=, >, >=, IN, NOT IN, BETWEEN, STARTS_WITH or IS [NOT] NULL")
        op = self.take().value
        self.counted(1, key.column)
        return Compare(key.value, op, (self.value(),), key.column)

    def value_list(self) -> tuple[Literal, ...]:
        if self.tok.kind != "(":
            raise self.fail("a parenthesized list of values after IN")
        self.take()
        values = [self.value()]
        while self.tok.kind == ",":
            self.take()
            values.append(self.value())
        if self.tok.kind != ")":
            raise self.fail("a comma or a closing parenthesis")
        self.take()
        return tuple(values)

    def value(self) -> Literal:
        tok = self.tok
        if tok.kind in ("STRING", "NUMBER"):
            self.take()
            return Literal(tok.value, tok.column, tok.text)
        if tok.kind == "KEYWORD" and tok.value in ("TRUE", "FALSE"):
            self.take()
            return Literal(tok.value == "TRUE", tok.column, tok.text)
        raise self.fail("a value", "a quoted string, a number, true or false")


def parse(text: str) -> Query:
    """The query's syntax tree; QueryError names the column where it stops making sense."""
    return _Parser(text).query()
