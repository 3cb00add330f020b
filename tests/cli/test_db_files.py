"""The database's files: created private whatever the umask, an exposed one reported, and never
created or initialised by a command that only reads.

The modes are checked from inside a running flow (a step reads them while the run holds the
database open, so the -wal and -shm files exist), in a real `dex` process under umask 022.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import Cli, assert_error, subprocess_env

MODES_FLOW = '''
import json, os, stat
from pathlib import Path

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Record(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        db = Path(os.environ["HOME"]) / ".dex" / "dex.db"
        files = (db.parent, db, Path(f"{db}-wal"), Path(f"{db}-shm"))
        Path(os.environ["MODES_OUT"]).write_text(json.dumps({p.name: stat.S_IMODE(p.stat().st_mode) for p in files}))
        return graceful_complete(input)


class ModesFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Record())
'''

READS = [["list"], ["list", "--query", "FlowStatus = 'RUNNING'"], ["inspect", "x"], ["inspect", "x", "--json"],
         ["inspect", "x", "--timeline"], ["doctor"], ["time"], ["watch", "x"],
         ["wait", "x", "--attribute", "a", "--equals", "1"], ["lint", "--flow-id", "x"]]


def test_a_new_database_is_private_under_umask_022(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    flow = tmp_path / "modes.py"
    flow.write_text(textwrap.dedent(MODES_FLOW))
    env = subprocess_env(tmp_path / "unused.db")
    del env["DEX_DB"]  # the default database, ~/.dex/dex.db, which dex creates with its folder
    env.update(HOME=str(home), MODES_OUT=str(tmp_path / "modes.json"))
    res = subprocess.run([sys.executable, "-m", "dexcli", "run", "--file", f"{flow}:ModesFlow", "--input", "1"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         preexec_fn=lambda: os.umask(0o022))
    assert res.returncode == 0, res.stderr
    modes = json.loads((tmp_path / "modes.json").read_text())
    assert modes == {".dex": 0o700, "dex.db": 0o600, "dex.db-wal": 0o600, "dex.db-shm": 0o600}, \
        {k: oct(v) for k, v in modes.items()}


def test_a_database_folder_dex_creates_is_private(cli: Cli, tmp_path: Path) -> None:
    db = tmp_path / "a" / "b" / "dex.db"
    old = os.umask(0o022)
    try:
        cli.ok("--db", str(db), "run", "three-steps", "--input", "1")
    finally:
        os.umask(old)
    assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in (tmp_path / "a", db.parent, db)] == \
        [oct(0o700), oct(0o700), oct(0o600)]


EXPOSED = "dex.db 0644, dex.db-wal 0644, dex.db-shm 0644"


def test_a_database_others_can_read_is_reported_once(cli: Cli) -> None:
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1")
    cli.db.chmod(0o644)  # SQLite gives the -wal and -shm files it makes (on the next open) the same mode
    res = cli.ok("list")
    assert "t " in res.stdout
    assert res.stderr.splitlines() == [
        f"dex: warning: the database {cli.db} can be read by other users ({EXPOSED}); make it private: "
        f"chmod go= {cli.db}*"]
    doctor = cli.ok("doctor", code=1)  # a finding of the doctor's own, not a warning besides
    assert doctor.stderr == ""
    assert doctor.stdout.splitlines() == [
        f"the database {cli.db} can be read by other users ({EXPOSED}); make it private: chmod go= {cli.db}*",
        "1 flow(s) checked, 1 problem(s)"]
    subprocess.run(f"chmod go= {cli.db}*", shell=True, check=True)  # the fix it suggests
    assert cli.ok("list").stderr == ""
    assert cli.ok("doctor").stdout.splitlines() == ["1 flow(s) checked, 0 problem(s)"]


@pytest.mark.parametrize("cmd", READS, ids=" ".join)
def test_a_read_leaves_an_empty_file_as_it_is(cli: Cli, cmd: list[str]) -> None:
    cli.db.write_bytes(b"")
    assert_error(cli(*cmd), 5, f"{cli.db} is not a dex database (it is an empty file)")
    assert cli.db.stat().st_size == 0
    assert sorted(p.name for p in cli.db.parent.iterdir()) == ["dex.db"]


@pytest.mark.parametrize("cmd", READS, ids=" ".join)
def test_a_read_creates_no_database(cli: Cli, cmd: list[str]) -> None:
    assert_error(cli(*cmd), 3, f"no dex database at {cli.db}")
    assert not cli.db.exists()
