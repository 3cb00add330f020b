"""The Attribute Store outbox: projections of synced attributes not yet written to their stores.

A write of an attribute declared `sync_to_attribute_store=True` marks its (flow, key) here in
the transaction that writes the attribute, with the value written (NULL for a delete). So a
projection is never lost: if the process dies after that commit, the row is still there and the
next process that drains the outbox writes it. A row holds the latest value only (Dex's
projection is latest-state): a later write replaces it and bumps `seq`. A drainer claims rows
(`owner`, `lease_until`) before it writes them to the stores, and deletes each one after, only
marks each one SYNCED after, only if its `seq` is still the one it wrote; a row written
meanwhile stays PENDING for the next drain, so an older value can never overwrite a newer one in
the store. A claim of a process that died, or whose lease ran out, can be taken over. A SYNCED
row stays (one per synced key of a flow): `dex inspect` shows where each value went. A row
whose writes failed for about an hour is FAILED (`give_up`): not retried, its value kept; the
next process that opens the stores puts it back to PENDING (`requeue_failed`), as does the
next write of the attribute.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from dexcli.store.owners import owner_alive

PENDING, SYNCED, SKIPPED, FAILED = "PENDING", "SYNCED", "SKIPPED", "FAILED"
_COLUMNS = "flow_id, key, value, seq, written, status, owner, lease_until, attempts, next_at, error, stores"


@dataclass(frozen=True)
class SyncRow:
    flow_id: str
    key: str
    value: str | None  # JSON; None: deleted (SQL NULL)
    seq: int
    written: float
    status: str  # PENDING | SYNCED | SKIPPED | FAILED
    owner: str | None
    lease_until: float | None
    attempts: int
    next_at: float
    error: str | None
    stores: str | None  # JSON list of the stores it was last written to


def _rows(c: sqlite3.Connection, where: str, args: tuple[Any, ...], limit: int = -1) -> list[SyncRow]:
    return [SyncRow(*r) for r in c.execute(f"SELECT {_COLUMNS} FROM attribute_sync WHERE {where} "
                                           "ORDER BY flow_id, key LIMIT ?", (*args, limit)).fetchall()]


def mark(c: sqlite3.Connection, flow_id: str, key: str, value: str | None, now: float) -> None:
    """A synced attribute was written (in this transaction): project its latest value, due at
    once (`now` is the flow's clock, which time skipping may have moved ahead: not a due time)."""
    c.execute("INSERT INTO attribute_sync (flow_id, key, value, seq, written, next_at) VALUES (?, ?, ?, 1, ?, 0) "
              "ON CONFLICT (flow_id, key) DO UPDATE SET value = excluded.value, seq = seq + 1, "
              "written = excluded.written, status = 'PENDING', attempts = 0, next_at = 0, "
              "error = NULL", (flow_id, key, value, now))


def claim(c: sqlite3.Connection, owner: str, now: float, lease: float, limit: int = 500) -> list[SyncRow]:
    """Take the pending rows due now that nobody else is writing (in a write transaction)."""
    due = _rows(c, "status = 'PENDING' AND next_at <= ?", (now,), limit)
    free = [r for r in due if r.owner is None or r.owner == owner or (r.lease_until or 0) < now
            or owner_alive(r.owner) is False]
    c.executemany("UPDATE attribute_sync SET owner = ?, lease_until = ? WHERE flow_id = ? AND key = ?",
                  [(owner, now + lease, r.flow_id, r.key) for r in free])
    return free


def delivered(c: sqlite3.Connection, row: SyncRow, stores: list[str]) -> None:
    """Every store of the row's route has its value (unless written again since)."""
    c.execute("UPDATE attribute_sync SET status = 'SYNCED', stores = ?, error = NULL, attempts = 0 "
              "WHERE flow_id = ? AND key = ? AND seq = ?", (json.dumps(stores), row.flow_id, row.key, row.seq))
    release(c, row)


def release(c: sqlite3.Connection, row: SyncRow) -> None:
    c.execute("UPDATE attribute_sync SET owner = NULL, lease_until = NULL WHERE flow_id = ? AND key = ?",
              (row.flow_id, row.key))


def retry(c: sqlite3.Connection, row: SyncRow, next_at: float, error: str) -> None:
    """Writing it failed: again at `next_at` (a row written since is due at once anyway)."""
    c.execute("UPDATE attribute_sync SET attempts = attempts + 1, next_at = ?, error = ? "
              "WHERE flow_id = ? AND key = ? AND seq = ?", (next_at, error, row.flow_id, row.key, row.seq))
    release(c, row)


def give_up(c: sqlite3.Connection, row: SyncRow, error: str) -> None:
    """Writing it failed for too long: FAILED, not retried (its value kept) until it is requeued
    or the attribute is written again."""
    c.execute("UPDATE attribute_sync SET status = 'FAILED', attempts = attempts + 1, error = ? "
              "WHERE flow_id = ? AND key = ? AND seq = ?", (error, row.flow_id, row.key, row.seq))
    release(c, row)


def any_failed(c: sqlite3.Connection) -> bool:
    return c.execute("SELECT 1 FROM attribute_sync WHERE status = 'FAILED' LIMIT 1").fetchone() is not None


def requeue_failed(c: sqlite3.Connection) -> int:
    """Every FAILED row PENDING again, due at once, its attempts from 0 (the stores are open
    again); how many."""
    return c.execute("UPDATE attribute_sync SET status = 'PENDING', attempts = 0, next_at = 0 "
                     "WHERE status = 'FAILED'").rowcount


def skip(c: sqlite3.Connection, row: SyncRow, reason: str, stores: list[str]) -> None:
    """A store cannot take this value (Dex filters it): not retried, with the reason, until the
    attribute is written again (`stores`: those it was written to all the same)."""
    c.execute("UPDATE attribute_sync SET status = 'SKIPPED', error = ?, stores = ? "
              "WHERE flow_id = ? AND key = ? AND seq = ?", (reason, json.dumps(stores), row.flow_id, row.key, row.seq))
    release(c, row)


def of_flow(c: sqlite3.Connection, flow_id: str) -> list[SyncRow]:
    """A flow's projections (pending, synced, skipped), for inspect (none in a read-only database
    of an older dex, which has no outbox)."""
    try:
        return _rows(c, "flow_id = ?", (flow_id,))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise


def next_due(c: sqlite3.Connection) -> float | None:
    value = c.execute("SELECT MIN(next_at) FROM attribute_sync WHERE status = 'PENDING'").fetchone()[0]
    return None if value is None else float(value)
