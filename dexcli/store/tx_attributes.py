"""The statements of attributes, their search index and their locks (mixed into `Tx`).

An attribute is a row per physical key (`name`, or `name/<urlencoded instance>`) holding its
JSON value; deleting it removes the row. An indexed attribute also has rows in
`search_attributes`, rewritten with each write. A lock is a row per key naming its holder: a
step execution holds it while its attempt runs (a row whose step is no longer RUNNING is
free), an RPC until it commits or its `expires` time passes (its process died).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from dexcli.store.records import db_of, json_value

LOCK_RETRY_SECONDS = 1.0  # a step waiting on a lock looks again at least this often


class AttributeStatements:
    c: sqlite3.Connection

    def attributes_of(self, flow_id: str, loads: tuple[str, ...] = ()) -> dict[str, str]:
        """Plain attributes, and the AttributeMap instances `loads` names (`name/` for every
        instance of a map, `name/<instance>` for one): physical key -> value JSON."""
        rows = self.c.execute("SELECT key, name, instance, value FROM attributes WHERE flow_id = ?",
                              (flow_id,)).fetchall()
        whole = {k[:-1] for k in loads if k.endswith("/")}
        some = {k for k in loads if not k.endswith("/")}
        return {key: value for key, name, instance, value in rows
                if instance is None or name in whole or key in some}

    def attribute_values(self, flow_id: str) -> list[tuple[str, str, str | None, str]]:
        """Every attribute of a flow: (key, name, instance, value JSON), by key."""
        rows = self.c.execute("SELECT key, name, instance, value FROM attributes WHERE flow_id = ? ORDER BY key",
                              (flow_id,)).fetchall()
        for key, _name, _instance, value in rows:  # the views decode them: a damaged one is named here
            json_value(value, db_of(self.c), "attributes", f"{flow_id!r} {key!r}")
        return [tuple(r) for r in rows]

    def put_attribute(self, flow_id: str, key: str, name: str, instance: str | None, value: str, now: float) -> None:
        self.c.execute("INSERT INTO attributes (flow_id, key, name, instance, value, updated) "
                       "VALUES (?, ?, ?, ?, ?, ?) "
                       "ON CONFLICT(flow_id, key) DO UPDATE SET value = excluded.value, updated = excluded.updated",
                       (flow_id, key, name, instance, value, now))

    def delete_attribute(self, flow_id: str, key: str) -> None:
        self.c.execute("DELETE FROM attributes WHERE flow_id = ? AND key = ?", (flow_id, key))

    def set_search(self, flow_id: str, attr_key: str, index_key: str, type_: str,
                   values: list[tuple[str | None, float | None]]) -> None:
        """Replace the index rows one attribute contributes (none: it was deleted)."""
        self.c.execute("DELETE FROM search_attributes WHERE flow_id = ? AND attr_key = ?", (flow_id, attr_key))
        self.c.executemany("INSERT INTO search_attributes (flow_id, key, attr_key, type, text, num) "
                           "VALUES (?, ?, ?, ?, ?, ?)",
                           [(flow_id, index_key, attr_key, type_, text, num) for text, num in values])

    # --- locks ----------------------------------------------------------------------------
    def lock_holder(self, flow_id: str, key: str, now: float) -> str | None:
        """Who holds the lock on `key` now (None: it is free)."""
        row = self.c.execute(
            "SELECT l.holder FROM attribute_locks l LEFT JOIN steps s ON s.flow_id = l.flow_id "
            "AND s.step_execution_id = l.holder WHERE l.flow_id = ? AND l.key = ? AND "
            "((l.expires IS NOT NULL AND l.expires > ?) OR (l.expires IS NULL AND s.status = 'RUNNING'))",
            (flow_id, key, now)).fetchone()
        return None if row is None else str(row[0])

    def try_locks(self, flow_id: str, keys: tuple[str, ...], holder: str, now: float,
                  expires: float | None = None) -> tuple[str, str] | None:
        """Take every lock in `keys` for `holder`, or none: returns (key, its holder) of the
        first one another holder has."""
        for key in keys:
            other = self.lock_holder(flow_id, key, now)
            if other is not None and other != holder:
                return key, other
        self.c.executemany("INSERT INTO attribute_locks (flow_id, key, holder, acquired, expires) "
                           "VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT(flow_id, key) DO UPDATE SET holder = excluded.holder, "
                           "acquired = excluded.acquired, expires = excluded.expires",
                           [(flow_id, k, holder, now, expires) for k in keys])
        return None

    def release_locks(self, flow_id: str, holder: str, now: float) -> None:
        """Free what `holder` holds, and make the steps waiting for those keys runnable now."""
        keys = [r[0] for r in self.c.execute("DELETE FROM attribute_locks WHERE flow_id = ? AND holder = ? "
                                             "RETURNING key", (flow_id, holder)).fetchall()]
        if keys:
            self.c.execute(f"UPDATE steps SET next_attempt_at = ?, lock_wait = NULL WHERE flow_id = ? AND "
                           f"status = 'QUEUED' AND lock_wait IN ({','.join('?' for _ in keys)})",
                           (now, flow_id, *keys))

    def wait_for_lock(self, flow_id: str, seid: str, key: str, now: float) -> None:
        """A queued step could not take `key`: it waits (woken on release, or polls)."""
        self.c.execute("UPDATE steps SET lock_wait = ?, next_attempt_at = ? WHERE flow_id = ? "
                       "AND step_execution_id = ?", (key, now + LOCK_RETRY_SECONDS, flow_id, seid))

    def locks_of(self, flow_id: str, now: float) -> list[tuple[str, str, float, Any]]:
        """The live locks of a flow: (key, holder, acquired, expires)."""
        rows = self.c.execute(
            "SELECT l.key, l.holder, l.acquired, l.expires FROM attribute_locks l LEFT JOIN steps s "
            "ON s.flow_id = l.flow_id AND s.step_execution_id = l.holder WHERE l.flow_id = ? AND "
            "((l.expires IS NOT NULL AND l.expires > ?) OR (l.expires IS NULL AND s.status = 'RUNNING')) "
            "ORDER BY l.key", (flow_id, now)).fetchall()
        return [tuple(r) for r in rows]
