"""`dex list --query` within bounds: up to 200 comparisons (IN values count one each) and 8
parentheses and NOTs inside one another run, written so SQLite's parser takes them; beyond,
one `dex: error: query: ...` line and exit 2 (before: RecursionError or sqlite3 tracebacks)."""

from __future__ import annotations

import pytest

from dexcli.store.query import MAX_COMPARISONS, MAX_NESTING
from tests.cli.cli_helpers import assert_error
from tests.cli.test_search_cli import orders  # noqa: F401 - the fixture


def _ids(res) -> list[str]:
    return [line.split()[0] for line in res.stdout.splitlines()[1:]]


def test_80_ored_comparisons_on_an_indexed_attribute_run(cli, orders):  # noqa: F811
    q = " OR ".join(f"OrderStatus = 'v{i}'" for i in range(79)) + " OR OrderStatus = 'new'"
    assert _ids(cli.ok("list", "--query", q)) == ["o2"]
    q = " AND ".join(f"OrderStatus != 'v{i}'" for i in range(MAX_COMPARISONS - 1)) + " AND OrderStatus != 'paid'"
    assert sorted(_ids(cli.ok("list", "--query", q))) == ["o2", "o5"]


def test_in_takes_up_to_the_bound_of_values(cli, orders):  # noqa: F811
    values = ", ".join(f"'v{i}'" for i in range(MAX_COMPARISONS - 1))
    assert _ids(cli.ok("list", "--query", f"OrderStatus IN ({values}, 'shipped')")) == ["o5"]
    values = ", ".join(f"'v{i}'" for i in range(1000))
    assert_error(cli("list", "--query", f"OrderStatus IN ({values})"), 2, "more than 200 comparisons")


def test_the_deepest_query_runs_and_one_more_level_is_refused(cli, orders):  # noqa: F811
    levels = MAX_NESTING // 2  # each level: a NOT and a parenthesis, the SQL's worst nesting
    q = "".join(f"NOT (OrderStatus != 'a{i}' AND " for i in range(levels)) + "OrderStatus != 'z'" + ")" * levels
    cli.ok("list", "--query", q)
    assert_error(cli("list", "--query", "(" + q + ")"), 2, f"more than {MAX_NESTING} parentheses and NOTs")


@pytest.mark.parametrize(("query", "said"), [
    ("(" * 500 + "OrderStatus = 'paid'" + ")" * 500, "more than 8 parentheses and NOTs"),
    ("NOT " * 2000 + "OrderStatus = 'paid'", "more than 8 parentheses and NOTs"),
    (" OR ".join(f"OrderStatus = 'v{i}'" for i in range(MAX_COMPARISONS + 1)), "more than 200 comparisons"),
    ("Amount = " + "9" * 5000, "a number out of range"),
    ("StartTime > 1e999", "a number out of range"),
])
def test_a_query_past_the_bounds_is_one_line(cli, orders, query, said):  # noqa: F811
    assert_error(cli("list", "--query", query), 2, "query:", said)
