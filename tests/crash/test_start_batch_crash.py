"""A client process whose batch of AsyncClient starts (one gather, one transaction:
dexcli.engine.start_batch) dies while the batch is written leaves none of its flows; one that
dies right after the COMMIT, before any caller is answered, leaves all of them, each with its
start step queued, and a worker runs every one to its end once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.crash.crashkit import ENV, ROOT, STEP_TIMEOUT, TEST_TIMEOUT, dex

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

N = 50

VICTIM = f"""
import asyncio, os, sys
from dexcli import AsyncClient
from dexcli.cli.driver import build_engine
from dexcli.cli.loader import load_flow
from dexcli.engine.clock import run
from dexcli.engine.start_batch import StartBatches
from dexcli.store import Store, Tx

engine = build_engine(Store(sys.argv[1]), time_skip=False)
flow, ref = load_flow("three-steps")
if sys.argv[2] == "writing":  # the steps are in, the events not yet: die inside the transaction
    def die(self, events):
        os._exit(137)
    Tx.add_events = die
else:  # committed: die before the first caller is told
    StartBatches._done = lambda self, outcome: os._exit(137)
client = AsyncClient(engine=engine)

async def go():
    await asyncio.gather(*(client.start_flow(flow, f"b-{{i}}", i, flow_ref=ref) for i in range({N})))

run(go, engine.clock)
"""


def _flows(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        return dict(conn.execute("SELECT flow_id, status FROM flows").fetchall())


def _steps(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT flow_id, step_execution_id, status FROM steps ORDER BY flow_id").fetchall()


@pytest.mark.parametrize("when", ["writing", "committed"])
def test_a_start_batch_is_all_or_nothing_across_a_crash(tmp_path: Path, when: str) -> None:
    db = tmp_path / "dex.db"
    p = subprocess.run([sys.executable, "-c", VICTIM, str(db), when], cwd=ROOT, env=ENV, text=True,
                       capture_output=True, timeout=STEP_TIMEOUT)
    assert p.returncode == 137, p.stderr
    if when == "writing":
        assert _flows(db) == {} and _steps(db) == []
        return
    ids = {f"b-{i}" for i in range(N)}
    assert _flows(db) == dict.fromkeys(ids, "RUNNING")
    assert sorted(_steps(db)) == sorted((f, "First-1", "QUEUED") for f in ids)
    rec = dex(db, "worker", "--until-idle")
    assert rec.returncode == 0, rec.describe()
    assert _flows(db) == dict.fromkeys(ids, "COMPLETED")
    with sqlite3.connect(db) as conn:
        outputs = dict(conn.execute("SELECT flow_id, completions FROM flows").fetchall())
        attempts = conn.execute("SELECT COUNT(*) FROM steps WHERE attempt != 1").fetchone()[0]
    assert {f: json.loads(c)[0]["output"] for f, c in outputs.items()} == {f"b-{i}": 2 * (i + 1) + 3 for i in range(N)}
    assert attempts == 0  # every step ran once
    doctor = dex(db, "doctor")
    assert doctor.returncode == 0, doctor.describe()
