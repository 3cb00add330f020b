"""Schema 7 adds the Attribute Store outbox (`attribute_sync`): a version 6 database (this
schema without it) is upgraded on its first open, keeps its flows, and its synced attributes'
writes are projected from then on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dexcli.store import Store
from dexcli.store.connection import SCHEMA_VERSION
from dexcli.testing import DexTestEnv
from tests.attrstore.stores import ProfileFlow, config, rows, sqlite_store


def test_a_version_6_database_gets_the_outbox_and_keeps_its_flows(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db, start=0.0) as env:
        env.run(ProfileFlow(), {"credits": 1}, "before")
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE attribute_sync")  # what version 6 was (nor had it version 8's columns)
    for column in ("flow_config", "first_run_id", "step_numbers", "retry_policy", "retry"):
        conn.execute(f"ALTER TABLE flows DROP COLUMN {column}")
    conn.execute("PRAGMA user_version = 6")
    conn.commit()
    conn.close()
    Store(db).close()  # the first open migrates it
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("SELECT COUNT(*) FROM attribute_sync").fetchone() == (0,)
    assert conn.execute("SELECT status FROM flows WHERE flow_id = 'before'").fetchone() == ("COMPLETED",)
    conn.close()
    store = sqlite_store(tmp_path / "a.db")
    with DexTestEnv(db, start=0.0) as env:
        env.engine.use_attribute_stores(config(a=store))
        env.run(ProfileFlow(), {"credits": 2}, "after")
    assert rows(store)["after"]["credits"] == 2 and "before" not in rows(store)
