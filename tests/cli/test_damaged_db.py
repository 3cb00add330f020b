"""A damaged database, with real files and the real `dex` command: one line naming the file and
what is wrong, the environment's exit code (5), never a traceback — in every command, `dex
doctor` included, and under a live run whose file is overwritten."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import subprocess_env

DEX = [sys.executable, "-m", "dexcli"]
READERS = [["list"], ["inspect", "done"], ["doctor"], ["resume", "done"],
           ["watch", "done"]]


def dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DEX, *args], env=subprocess_env(db), capture_output=True, text=True, timeout=60)


def one_line(res: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert res.returncode == 5, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dex: error: "), res.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("healthy") / "dex.db"
    res = dex(db, "run", "three-steps", "--flow-id", "done", "--input", "1")
    assert res.returncode == 0, res.stderr
    return db


# (what is done to the file, what the line says besides its name)
DAMAGE = {
    "user_version -1": ("PRAGMA user_version = -1", "its schema version is -1"),
    "a dropped table": ("DROP TABLE history", "no such table: history"),
    "an unknown status": ("UPDATE flows SET status = 'DONE'", "table flows row 'done': status 'DONE' is not one of"),
    "bad JSON in a flow": ("UPDATE flows SET completions = '[{'", "table flows row 'done': completions is not JSON"),
    "bad JSON in a step": ("UPDATE steps SET options = 'nope' WHERE step_execution_id = 'First-1'",
                           "table steps row 'done' 'First-1': options is not JSON"),
    "bad JSON in history": ("UPDATE history SET payload = '{' WHERE seq = (1 << 24) + 2",  # see schema.sql
                            "table history row 'done' event 2"),
    "an unknown attempt outcome": ("INSERT INTO ended_attempts (flow_id, step_execution_id, attempt, start_time, "
                                   "outcome) VALUES ('done', 'First-1', 0, 0, 'MAYBE')",
                                   "table attempts row 'done' 'First-1'"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_database_is_one_line_in_every_command(healthy, tmp_path, damage):
    sql, says = DAMAGE[damage]
    db = tmp_path / "dex.db"
    db.write_bytes(healthy.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute(sql)
    conn.close()
    db.chmod(0o600)  # a copy dex did not make: private, as dex makes its own (else it warns first)
    readers = READERS if damage not in ("bad JSON in a step", "bad JSON in history", "a dropped table",
                                        "an unknown attempt outcome") else READERS[1:]  # list reads flows only
    for args in readers:
        one_line(dex(db, *args), f"the database {db} is damaged", says)


def test_a_file_overwritten_with_garbage(healthy, tmp_path):
    db = tmp_path / "dex.db"
    db.write_bytes(b"\xde\xad" * (len(healthy.read_bytes()) // 2))
    for args in (["list"], ["doctor"], ["inspect", "done"]):
        one_line(dex(db, *args), f"{db} is not a dex database, or it is damaged")


def test_a_truncated_file(healthy, tmp_path):
    """The first pages are there (a dex database by its header), the rest is gone."""
    db = tmp_path / "dex.db"
    data = healthy.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    for args in (["list"], ["doctor"], ["inspect", "done"]):
        line = one_line(dex(db, *args), str(db))
        assert "damaged" in line, line


WRECKER = '''
import os
import sqlite3

from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


class Wreck(Step[int]):
    """Overwrites the database under the run that drives it (once its WAL is checkpointed
    into the file, so that nothing of it is left but the garbage)."""

    def execute(self, context: Context, input: int) -> StepDecision:
        path = os.environ["DEX_DB"]
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.write(b"\\xde\\xad" * (size // 2))
        return go_to(After, input)


class After(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class WreckFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Wreck()).other_steps(After())
'''


def test_a_database_overwritten_under_a_live_run(tmp_path):
    flow_file = tmp_path / "wreck.py"
    flow_file.write_text(textwrap.dedent(WRECKER))
    db = tmp_path / "dex.db"
    res = dex(db, "run", "--file", f"{flow_file}:WreckFlow", "--flow-id", "w", "--input", "1")
    line = one_line(res, f"the database {db} is damaged")
    assert "Traceback" not in res.stdout + res.stderr
    assert "FAILED" not in res.stdout, res.stdout  # the flow did not fail: its database went away
    assert line


def test_bad_json_in_an_attribute(tmp_path):
    db = tmp_path / "dex.db"
    res = dex(db, "run", "payment", "--flow-id", "pay", "--input", '{"payment_id": "p", "amount": 5}', "--time-skip")
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE attributes SET value = 'settled' WHERE key = 'payment_state'")
    conn.close()
    for args in (["inspect", "pay"], ["inspect", "pay", "--json"]):
        one_line(dex(db, *args), f"the database {db} is damaged", "table attributes row 'pay' 'payment_state'",
                 "value is not JSON")


def test_doctor_finds_a_damaged_page_no_other_read_touches(healthy, tmp_path):
    """A zeroed page of an index that neither `list` nor the flows' own reads use: only a check
    of the whole file finds it."""
    db = tmp_path / "dex.db"
    db.write_bytes(healthy.read_bytes())
    with sqlite3.connect(db) as conn:
        page = conn.execute("SELECT pageno FROM dbstat WHERE name = 'flows_by_type'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with open(db, "r+b") as f:
        f.seek((page - 1) * size)
        f.write(bytes(size))
    assert dex(db, "list").returncode == 0
    one_line(dex(db, "doctor"), f"the database {db} is damaged")


def test_a_worker_meets_a_flow_with_an_unknown_status(tmp_path):
    from tests.cli.cli_helpers import start_flow

    db = tmp_path / "dex.db"
    start_flow(db, "three-steps", "queued", input=1)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE flows SET status = 'PAUSED'")
    conn.close()
    one_line(dex(db, "worker", "--until-idle"), f"the database {db} is damaged", "table flows row 'queued'",
             "status 'PAUSED'")
