"""The statements of attributes, their search index and their locks (mixed into `Tx`).

An attribute is a row per physical key (`name`, or `name/<urlencoded instance>`) holding its
JSON value; deleting it removes the row. An indexed attribute also has rows in
`search_attributes`, rewritten with each write. A lock is a row per key naming its holder: a
step execution holds it for its whole method call (every attempt and the backoffs between
them, as on a Dex server; a row whose step is no longer in that call is free), an RPC until it
commits or its `expires` time passes (its process died).

Every attempt of one method call reads the attributes as they were when the call began (the
server hands each retry the snapshot its call took). The snapshot is kept by difference: a
write saves, for each step execution in a call, the value it overwrites (once per key and
call) in `attribute_snapshots`; a retry reads the live rows with those laid over them. A call
drops what an earlier call of its step kept as it begins; what ended calls kept goes with the
next such write, or the flow's close.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from dexcli.store import attribute_outbox
from dexcli.store.records import db_of, json_value

LOCK_RETRY_SECONDS = 1.0  # a step waiting on a lock looks again at least this often

# A step execution is in a method call from its first attempt's lease until the method ends:
# running, backing off, or given back between attempts (a clean stop) with attempts of the
# method behind it. Not yet begun (QUEUED with none), waiting, or ended: not in one.
IN_CALL = "(s.status IN ('RUNNING', 'BACKOFF') OR (s.status = 'QUEUED' AND s.attempt > s.method_base))"


def _loaded(loads: tuple[str, ...]) -> Callable[[str, str, str | None], bool]:
    """Whether a key is in a snapshot: plain attributes always, AttributeMap instances when
    `loads` names their map (`name/`) or them."""
    whole = {k[:-1] for k in loads if k.endswith("/")}
    some = {k for k in loads if not k.endswith("/")}
    return lambda key, name, instance: instance is None or name in whole or key in some


class AttributeStatements:
    c: sqlite3.Connection
    synced_attributes = False  # this transaction marked Attribute Store projections (the store tells after COMMIT)

    def mark_attribute_sync(self, flow_id: str, key: str, value: str | None, now: float) -> None:
        """A synced attribute's write: its projection joins the outbox in this transaction."""
        attribute_outbox.mark(self.c, flow_id, key, value, now)
        self.synced_attributes = True

    def attributes_of(self, flow_id: str, loads: tuple[str, ...] = ()) -> dict[str, str]:
        """Plain attributes, and the AttributeMap instances `loads` names (`name/` for every
        instance of a map, `name/<instance>` for one): physical key -> value JSON."""
        rows = self.c.execute("SELECT key, name, instance, value FROM attributes WHERE flow_id = ?",
                              (flow_id,)).fetchall()
        wanted = _loaded(loads)
        return {key: value for key, name, instance, value in rows if wanted(key, name, instance)}

    def attributes_at_call_start(self, flow_id: str, seid: str, loads: tuple[str, ...] = ()) -> dict[str, str]:
        """`attributes_of` as it was when the method call of `seid` began (for its retries)."""
        live = self.attributes_of(flow_id, loads)
        kept = self.c.execute("SELECT key, name, instance, value FROM attribute_snapshots WHERE flow_id = ? "
                              "AND step_execution_id = ?", (flow_id, seid)).fetchall()
        if not kept:
            return live
        wanted = _loaded(loads)
        for key, name, instance, value in kept:
            live.pop(key, None)
            if value is not None and wanted(key, name, instance):
                live[key] = value
        return live

    def keep_call_snapshots(self, flow_id: str, keys: list[str], writer: str | None) -> None:
        """`keys` are about to be written: for each step execution in a method call (but the
        writer, whose call ends with this write), save what each key holds now, unless its call
        saved that key already (NULL: the key did not exist). What steps no longer in a call
        kept goes first: nothing reads it again."""
        self.c.execute(f"DELETE FROM attribute_snapshots WHERE flow_id = ?1 AND step_execution_id NOT IN ("
                       f"SELECT s.step_execution_id FROM steps s WHERE s.flow_id = ?1 AND {IN_CALL})", (flow_id,))
        self.c.executemany(
            "INSERT OR IGNORE INTO attribute_snapshots (flow_id, step_execution_id, key, name, instance, value) "
            f"SELECT s.flow_id, s.step_execution_id, ?1, a.name, a.instance, a.value FROM steps s "
            f"LEFT JOIN attributes a ON a.flow_id = s.flow_id AND a.key = ?1 "
            f"WHERE s.flow_id = ?2 AND s.step_execution_id IS NOT ?3 AND {IN_CALL}",
            [(key, flow_id, writer) for key in keys])

    def forget_call_snapshot(self, flow_id: str, seid: str | None = None) -> None:
        """A method call ended (or begins: nothing of an earlier one applies); None: every one
        of the flow (it closed)."""
        if seid is None:
            self.c.execute("DELETE FROM attribute_snapshots WHERE flow_id = ?", (flow_id,))
        else:
            self.c.execute("DELETE FROM attribute_snapshots WHERE flow_id = ? AND step_execution_id = ?",
                           (flow_id, seid))

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
            f"((l.expires IS NOT NULL AND l.expires > ?) OR (l.expires IS NULL AND {IN_CALL}))",
            (flow_id, key, now)).fetchone()
        return None if row is None else str(row[0])

    def try_locks(self, flow_id: str, keys: tuple[str, ...], holder: str, now: float,
                  expires: float | None = None) -> tuple[str, str] | None:
        """Take every lock in `keys` for `holder`, or none: returns (key, its holder) of the
        first one another holder has. A holder taking its own locks again (the next attempt of
        its call) keeps the time it first took them."""
        for key in keys:
            other = self.lock_holder(flow_id, key, now)
            if other is not None and other != holder:
                return key, other
        self.c.executemany("INSERT INTO attribute_locks (flow_id, key, holder, acquired, expires) "
                           "VALUES (?, ?, ?, ?, ?) "
                           "ON CONFLICT(flow_id, key) DO UPDATE SET acquired = CASE WHEN holder = excluded.holder "
                           "THEN acquired ELSE excluded.acquired END, holder = excluded.holder, "
                           "expires = excluded.expires",
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
            f"((l.expires IS NOT NULL AND l.expires > ?) OR (l.expires IS NULL AND {IN_CALL})) "
            "ORDER BY l.key", (flow_id, now)).fetchall()
        return [tuple(r) for r in rows]
