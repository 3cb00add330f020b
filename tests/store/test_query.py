"""The visibility query language's parser and compiler, without a database: every operator, the
precedence of NOT > AND > OR, literals, ORDER BY, and errors that name the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dexcli.store.query import MAX_COMPARISONS, MAX_NESTING, Compare, Literal, Logical, Not, QueryError, parse
from dexcli.store.query_sql import compile_query

TYPES = {"Status": "keyword", "Tags": "keyword_array", "Notes": "full_text", "Amount": "int", "Price": "double",
         "Vip": "bool", "Due": "datetime"}


def key_type(key: str) -> str | None:
    return TYPES.get(key)


def cmp(node: Any) -> tuple[str, str, Any]:
    assert isinstance(node, Compare)
    return node.key, node.op, node.values[0].value


@pytest.mark.parametrize("op", ["=", "!=", "<", "<=", ">", ">="])
def test_every_operator(op: str) -> None:
    assert cmp(parse(f"Amount {op} 5").where) == ("Amount", op, 5)


def test_the_servers_operators_parse() -> None:
    """BETWEEN, STARTS_WITH, IS [NOT] NULL and NOT IN, as Temporal's visibility queries write them;
    BETWEEN's AND belongs to it, not to the conjunction."""
    node = parse("Amount BETWEEN 1 AND 5 AND Status STARTS_WITH 'pa'").where
    assert isinstance(node, Logical) and node.op == "AND"
    assert isinstance(node.left, Compare) and (node.left.op, [v.value for v in node.left.values]) == ("BETWEEN", [1, 5])
    assert cmp(node.right) == ("Status", "STARTS_WITH", "pa")
    nulls = parse("Status IS NULL OR Tags is not null").where
    assert isinstance(nulls, Logical) and isinstance(nulls.left, Compare) and isinstance(nulls.right, Compare)
    assert [(c.op, c.values) for c in (nulls.left, nulls.right)] == [("IS NULL", ()), ("IS NOT NULL", ())]
    notin = parse("Status NOT IN ('a', 'b')").where
    assert isinstance(notin, Compare) and (notin.op, [v.value for v in notin.values]) == ("NOT IN", ["a", "b"])


def test_literals() -> None:
    assert cmp(parse("Status = 'paid'").where)[2] == "paid"
    assert cmp(parse('Status = "pa\'id"').where)[2] == "pa'id"
    assert cmp(parse("Status = 'it''s'").where)[2] == "it's"
    assert cmp(parse("Price >= -2.5e1").where)[2] == -25.0
    assert cmp(parse("Vip = TRUE").where)[2] is True
    assert cmp(parse("Vip = false").where)[2] is False
    assert cmp(parse("`odd key!` = 1").where)[0] == "odd key!"
    assert cmp(parse("Amount <> 1").where)[1] == "!="


def test_not_binds_tighter_than_and_which_binds_tighter_than_or() -> None:
    tree = parse("A = 1 OR NOT B = 2 AND C = 3").where
    assert isinstance(tree, Logical) and tree.op == "OR"
    assert cmp(tree.left) == ("A", "=", 1)
    assert isinstance(tree.right, Logical) and tree.right.op == "AND"
    assert isinstance(tree.right.left, Not) and cmp(tree.right.left.operand) == ("B", "=", 2)
    grouped = parse("(A = 1 OR B = 2) and C = 3").where
    assert isinstance(grouped, Logical) and grouped.op == "AND" and isinstance(grouped.left, Logical)


def test_in_and_order_by() -> None:
    q = parse("Status IN ('a', 'b') ORDER BY Amount asc")
    assert isinstance(q.where, Compare) and q.where.op == "IN"
    assert [v.value for v in q.where.values] == ["a", "b"]
    assert (q.order_key, q.descending) == ("Amount", False)
    assert (parse("").order_key, parse("").descending, parse("").where) == ("StartTime", True, None)
    assert parse("order by CloseTime").descending is False
    assert parse("ORDER BY CloseTime DESC").descending is True


@pytest.mark.parametrize(("query", "column", "expected"), [
    ("OrderStatus = AND FlowStatus = 'RUNNING'", 15, "expected a value"),
    ("OrderStatus 'paid'", 13, "expected an operator"),
    ("= 'paid'", 1, "expected a key"),
    ("(A = 1", 7, "expected a closing parenthesis"),
    ("A = 1 B = 2", 7, "expected AND, OR, ORDER BY or the end"),
    ("A = 'open", 5, "expected a closing '"),
    ("A = 1 ORDER Amount", 13, "expected BY"),
    ("A IN 1", 6, "expected a parenthesized list"),
    ("A = 1 AND", 10, "expected a key"),
    ("A = #", 5, "unexpected character"),
])
def test_errors_name_the_column(query: str, column: int, expected: str) -> None:
    with pytest.raises(QueryError) as e:
        parse(query)
    assert e.value.column == column
    assert expected in str(e.value)
    assert str(e.value).startswith("query: ")
    assert e.value.exit_code == 2


def sql(query: str) -> tuple[str, tuple[Any, ...]]:
    c = compile_query(parse(query), key_type)
    return c.where, c.args


def test_builtins_compare_columns_of_flows() -> None:
    assert sql("FlowType = 'Orders'") == ("f.flow_type = ?", ("Orders",))
    assert sql("FlowStatus = 'Running'") == ("f.status = ?", ("RUNNING",))  # any case
    assert sql("FlowId != 'x'") == ("f.flow_id != ?", ("x",))
    assert sql("StartTime >= '1970-01-01T00:01:00Z'") == ("f.start_time >= ?", (60.0,))
    assert sql("CloseTime < '1970-01-01T00:01:00'") == ("f.close_time < ?", (60.0,))  # no zone: UTC


def test_index_keys_read_the_column_of_their_type() -> None:
    where, args = sql("Status = 'paid'")
    assert "text = ?" in where and args == ("Status", "paid")
    where, args = sql("Vip = true")
    assert "num = ?" in where and args == ("Vip", 1.0)
    where, args = sql("Due > '1970-01-02T00:00:00Z'")
    assert "num > ?" in where and args == ("Due", 86400.0)
    where, args = sql("Notes = 'Big  Order'")
    assert "LIKE" in where and args == ("Notes", "% big order %")
    where, args = sql("Unknown = 3")  # no flow has it yet: the literal decides
    assert "num = ?" in where and args == ("Unknown", 3.0)


def test_selective_comparisons_read_their_index_rows_and_others_test_each_flow() -> None:
    def dense(subquery: str, args: tuple[Any, ...]) -> bool:
        return args[1] != "rare"

    selective = compile_query(parse("Status = 'rare' AND Amount > 3"), key_type, dense)
    assert selective.where.startswith("(f.flow_id IN (") and "EXISTS" in selective.where and not selective.walk
    common = compile_query(parse("Status = 'common'"), key_type, dense)
    assert common.where.startswith("EXISTS") and common.walk
    builtin_only = compile_query(parse("FlowType = 'X'"), key_type, dense)
    assert not builtin_only.walk


@pytest.mark.parametrize(("query", "message"), [
    ("FlowStatus = 'Sleeping'", "FlowStatus is one of"),
    ("FlowStatus > 'RUNNING'", "takes =, !=, IN or NOT IN only, not >"),
    ("Amount = 'five'", "INT key: compare it with a number"),
    ("Status = 5", "KEYWORD key: compare it with a quoted string"),
    ("Vip = 1", "BOOL key: compare it with true or false"),
    ("Vip > true", "BOOL key: it takes = or != only"),
    ("Notes > 'a'", "FULL_TEXT key"),
    ("Due = 'tomorrow'", "compared with a time"),
    ("FlowType = 3", "compared with a quoted string"),
])
def test_type_errors_name_the_column(query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message) as e:
        compile_query(parse(query), key_type)
    assert e.value.column is not None


def test_a_literal_is_not_sql() -> None:
    where, args = sql("Status = 'x'' OR 1=1 --'")
    assert "1=1" not in where and args == ("Status", "x' OR 1=1 --")
    assert isinstance(parse("Status = 'x'").where, Compare)
    assert Literal("x", 1, "'x'").value == "x"


def test_a_run_of_one_operator_is_one_flat_group() -> None:
    """`a OR b OR c` is not `((a OR b) OR c)`: nested parentheses overflow SQLite's parser stack
    at about 70 comparisons."""
    where, args = sql("FlowType = 'a' OR FlowType = 'b' OR FlowType = 'c' OR FlowType = 'd'")
    assert where == "(f.flow_type = ? OR f.flow_type = ? OR f.flow_type = ? OR f.flow_type = ?)"
    assert args == ("a", "b", "c", "d")
    where, _ = sql("FlowType = 'a' AND (FlowType = 'b' OR FlowType = 'c') AND FlowType = 'd'")
    assert where == "(f.flow_type = ? AND (f.flow_type = ? OR f.flow_type = ?) AND f.flow_type = ?)"


@pytest.mark.parametrize(("query", "message"), [
    (" OR ".join(["Amount = 1"] * (MAX_COMPARISONS + 1)), "more than 200 comparisons"),
    ("Status IN (" + ", ".join(["'x'"] * MAX_COMPARISONS) + ") OR Amount = 1", "more than 200 comparisons"),
    ("(" * (MAX_NESTING + 1) + "Amount = 1" + ")" * (MAX_NESTING + 1), "more than 8 parentheses and NOTs"),
    ("NOT " * (MAX_NESTING + 1) + "Amount = 1", "more than 8 parentheses and NOTs"),
    ("Amount = 1e999", "a number out of range"),
])
def test_the_parser_bounds_a_query(query: str, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        parse(query)


def test_a_query_sqlite_still_cannot_take_is_a_query_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the parser's bounds SQLite's own limits answer: a QueryError, not an sqlite3 error."""
    from dexcli.store import Store, query
    from dexcli.store.search import search_flows

    monkeypatch.setattr(query, "MAX_NESTING", 10_000)
    store = Store(tmp_path / "dex.db")
    try:
        deep = "".join(f"(FlowType != 'a{i}' AND (FlowType = 'x' OR " for i in range(60)) + "FlowId = 'z'" + "))" * 60
        with pytest.raises(QueryError, match="too complex for SQLite"):
            search_flows(store, deep)
    finally:
        store.close()
