"""WHERE terms that let the scheduler's reads use the partial indexes of schema.sql, tests of a
column against a few constants written as equalities, and a worker's read of what is due first
in the index's own order (`due_first`).

SQLite uses a partial index only when the query's WHERE contains the index's own WHERE term,
so these queries spell it out. With them a scheduler pass reads what is open (queued, due,
running elsewhere, with a timeout or an offset), not every step a long-lived database holds,
and a pass that takes the first few due reads those, not every due step sorted.
"""

from __future__ import annotations

from typing import Any


def any_of(column: str, *values: str) -> str:
    """`column` is one of `values` (constants of dex's own), as equalities: SQLite builds a
    temporary B-tree for an IN of more than two values each time its statement runs, and for a
    partial index's WHERE on each write of a row (schema.sql's steps_open)."""
    return "(" + " OR ".join(f"{column} = '{value}'" for value in values) + ")"


def step_open(column: str) -> str:
    """`column` (a steps.status) is an open step's: queued, running, backing off or waiting
    (records.StepState.is_open)."""
    return any_of(column, "QUEUED", "RUNNING", "BACKOFF", "WAITING")


# steps_open: queued, backing off or waiting steps, by (status, next_attempt_at)
DUE_STATES = ("QUEUED", "BACKOFF", "WAITING")
STEPS_DUE = any_of("s.status", *DUE_STATES)


def due_first(select: str, *, due_by: bool = False, limit: str = "?") -> list[str]:
    """Every flow's open steps, earliest due first (`s.next_attempt_at - f.clock_offset`), as
    four statements that each read their rows in index order and stop at `limit`: one per state
    of steps_open for the flows on real time (no offset: `s.next_attempt_at` is then the due
    time, read as a range of the index), and one for the flows with an offset, found through
    flows_offsets. `select` is `SELECT …` of steps `s` and flows `f` (the FROM is added);
    `due_by` keeps only the steps due by a time. Bind in each: that time (`due_by`), then
    `limit`'s. Their union in due order, cut at `limit`, is the one query's `ORDER BY
    s.next_attempt_at - f.clock_offset LIMIT ?`, which read and sorted every open step at each
    scheduler pass (85 ms with 100,000 queued: bench/PROFILE.md round 10)."""
    real = [f"{select} FROM steps s JOIN flows f ON f.flow_id = s.flow_id WHERE s.status = '{state}' AND "
            + ("s.next_attempt_at <= ?" if due_by else "s.next_attempt_at IS NOT NULL")
            + f" AND f.clock_offset = 0 ORDER BY s.next_attempt_at LIMIT {limit}"
            for state in DUE_STATES]
    shifted = (f"{select} FROM flows f CROSS JOIN steps s ON s.flow_id = f.flow_id WHERE f.clock_offset != 0 "
               f"AND {STEPS_DUE} AND "
               + ("s.next_attempt_at - f.clock_offset <= ?" if due_by else "s.next_attempt_at IS NOT NULL")
               + f" ORDER BY s.next_attempt_at - f.clock_offset LIMIT {limit}")
    return [*real, shifted]


# flows_timeouts and flows_offsets (`+` keeps the status index out of the planner's choice)
FLOWS_WITH_TIMEOUT = "f.timeout_at IS NOT NULL AND +f.status = 'RUNNING'"
FLOWS_WITH_OFFSET = "clock_offset != 0 AND +status = 'RUNNING'"


def foreign_running(select: str, cond: str = "") -> str:
    """`select` (a SELECT … FROM steps s … WHERE ) over the RUNNING steps whose lease owner is
    not the `?` bound first in each part — three parts (below, above, none) so that each
    is a range of steps_running, not a scan of this process's own attempts. Bind the owner
    and `cond`'s arguments once per part."""
    parts = ("s.lease_owner < ?", "s.lease_owner > ?", "s.lease_owner IS NULL AND ? IS NOT NULL")
    return " UNION ALL ".join(f"{select}s.status = 'RUNNING' AND {p}{cond}" for p in parts)

# a flow's history, by key (see schema.sql): bind the flow id twice
HISTORY_OF = ("seq > (SELECT num FROM flows WHERE flow_id = ?) << 24 "
              "AND seq < ((SELECT num FROM flows WHERE flow_id = ?) + 1) << 24")


def prefix_range(column: str, prefix: str) -> tuple[str, list[Any]]:
    """`column` starts with `prefix`, as a range an index reads: from the prefix up to the prefix
    with its last character's successor (code point order is UTF-8's, SQLite's BINARY order)."""
    if not prefix:
        return f"{column} IS NOT NULL", []
    last = ord(prefix[-1])
    if last >= 0x10FFFF:
        return f"substr({column}, 1, ?) = ?", [len(prefix), prefix]
    upper = prefix[:-1] + chr(last + 1 if last + 1 not in range(0xD800, 0xE000) else 0xE000)
    return f"{column} >= ? AND {column} < ?", [prefix, upper]
