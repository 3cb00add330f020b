"""A process killed between an attribute's commit and its projection loses nothing: the next
process that opens the stores writes what the outbox kept (tests/attrstore/crash_child.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.store import Store
from dexcli.testing import DexTestEnv
from tests.attrstore.stores import config, rows, sqlite_store

ROOT = Path(__file__).resolve().parents[2]


def outbox(db: Path) -> list[tuple[str, str, str | None]]:
    store = Store(db)
    try:
        return store.read(lambda tx: tx.c.execute("SELECT flow_id, key, value FROM attribute_sync "
                                                  "WHERE status = 'PENDING' ORDER BY key").fetchall())
    finally:
        store.close()


@pytest.mark.parametrize("mode", ["after-commit", "after-upsert"])
def test_a_projection_killed_midway_is_written_by_the_next_process(tmp_path: Path, mode: str) -> None:
    db, store = tmp_path / "dex.db", sqlite_store(tmp_path / "a.db")
    child = subprocess.run([sys.executable, "-m", "tests.attrstore.crash_child", str(db), str(store), mode],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.returncode == -signal.SIGKILL, child.stderr
    # the attributes committed with the step; their projections are in the outbox
    assert outbox(db) == [("user-1", "balance/usd", "3"), ("user-1", "credits", "120"),
                          ("user-1", "email", '"ada@example.com"')]
    assert rows(store) == ({} if mode == "after-commit" else {"user-1": rows(store)["user-1"]})
    with DexTestEnv(db) as env:  # the next process: opening the stores writes what was left
        assert env.store.get_flow("user-1").status.value == "COMPLETED"
        env.engine.use_attribute_stores(config(a=store))
    row = rows(store)["user-1"]
    assert (row["email"], row["credits"], row["balance/usd"]) == ("ada@example.com", 120, 3)
    assert outbox(db) == []
