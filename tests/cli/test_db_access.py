"""A database that file modes keep dex from opening says why, in one line (exit 2): a read-only
folder (SQLite keeps its -wal and -shm files beside the database), a read-only or unreadable
file, a folder where a new database cannot be created. Never "not a dex database".

Real file modes (chmod), in real processes. Root ignores file modes, so as root the commands
run as an unprivileged user in a user namespace (`unshare --user --map-user`), where they apply;
where that is not possible the tests skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.cli_helpers import subprocess_env


def _unprivileged_prefix() -> list[str] | None:
    """How to run a command for which file modes apply: as it is (not root), or as an ordinary
    user in a user namespace (root); None when neither is possible."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    prefix = [unshare, "--user", "--map-user=1000", "--map-group=1000"]
    probe = subprocess.run([*prefix, "sh", "-c", "test ! -w /proc/1/environ && echo unprivileged"],
                           capture_output=True, text=True, timeout=30)
    return prefix if probe.stdout.strip() == "unprivileged" else None


PREFIX = _unprivileged_prefix()
pytestmark = pytest.mark.skipif(PREFIX is None, reason="running as root and cannot run as an unprivileged "
                                                       "user (no user namespaces): chmod would not restrict")


def dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert PREFIX is not None
    return subprocess.run([*PREFIX, sys.executable, "-m", "dexcli", "--db", str(db), *args],
                          env=subprocess_env(db), capture_output=True, text=True, timeout=60)


def one_error(res: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert res.returncode == 5, (res.returncode, res.stdout, res.stderr)  # the environment's code
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    line = lines[0]
    assert line.startswith("dex: error: ") and "not a dex database" not in line, line
    for f in fragments:
        assert f in line, (f, line)
    return line


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "data"
    d.mkdir()
    yield d
    d.chmod(0o755)  # so pytest can clean up
    for f in d.iterdir():
        f.chmod(0o644)


READS = (["list"], ["inspect", "t"], ["inspect", "t", "--json"], ["doctor"], ["time"], ["watch", "t"],
         ["list", "--query", "FlowStatus = 'COMPLETED'"])


def test_an_existing_database_in_a_read_only_folder(folder: Path) -> None:
    db = folder / "dex.db"
    assert dex(db, "run", "three-steps", "--flow-id", "t", "--input", "1").returncode == 0
    assert not Path(f"{db}-wal").exists()  # the last connection removed it: SQLite cannot create it again
    folder.chmod(0o555)
    for args in READS:  # read-only: nothing to create beside it
        res = dex(db, *args)
        assert res.returncode == 0 and res.stderr == "" and res.stdout, (args, res.stdout, res.stderr)
    for args in (["run", "three-steps", "--input", "1"], ["resume", "t"]):
        one_error(dex(db, *args), "database is read-only", str(db), f"its folder {folder} is not writable",
                  "dex.db-wal")
    assert sorted(f.name for f in folder.iterdir()) == ["dex.db"]


def test_a_read_only_folder_while_a_writer_has_the_database_open(folder: Path) -> None:
    """The -wal and -shm files exist: the reader goes through them and sees what is in the -wal
    only (not `immutable`, which would read the file as it is)."""
    from tests.cli.cli_helpers import start_flow

    db = folder / "dex.db"
    assert dex(db, "run", "three-steps", "--flow-id", "t", "--input", "1").returncode == 0
    import sqlite3

    writer = sqlite3.connect(db)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # what follows stays in the -wal
        start_flow(db, "three-steps", "in-wal", 1)
        folder.chmod(0o555)
        res = dex(db, "list")
        assert res.returncode == 0 and "in-wal" in res.stdout, (res.stdout, res.stderr)
    finally:
        writer.close()


def test_a_version_9_database_in_a_read_only_folder_is_read_as_it_is(folder: Path) -> None:
    """Schema 10 changed only an index's WHERE (what writes need): a version 9 database that dex
    may not write is read without the upgrade, and stays version 9."""
    import sqlite3

    from tests.store.test_migrate_v9 import make_version_9

    db = folder / "dex.db"
    assert dex(db, "run", "three-steps", "--flow-id", "t", "--input", "1").returncode == 0
    make_version_9(db)
    folder.chmod(0o555)
    for args in READS:
        res = dex(db, *args)
        assert res.returncode == 0 and res.stderr == "" and res.stdout, (args, res.stdout, res.stderr)
    one_error(dex(db, "resume", "t"), "database is read-only", str(db))
    folder.chmod(0o755)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (9,)
    conn.close()


def test_a_new_database_in_a_read_only_folder(folder: Path) -> None:
    folder.chmod(0o555)
    db = folder / "dex.db"
    one_error(dex(db, "run", "three-steps", "--input", "1"), f"cannot create the database {db}",
              f"the folder {folder} is not writable")
    assert not db.exists()


def test_a_read_only_database_file(folder: Path) -> None:
    db = folder / "dex.db"
    assert dex(db, "run", "three-steps", "--flow-id", "t", "--input", "1").returncode == 0
    db.chmod(0o400)  # (0444 would be reported: others could read it)
    for args in READS:
        res = dex(db, *args)
        assert res.returncode == 0 and res.stderr == "", (args, res.stdout, res.stderr)
    for args in (["run", "three-steps", "--input", "1"],):
        one_error(dex(db, *args), "database is read-only", str(db), "the file is read-only")


def test_an_unreadable_database_file(folder: Path) -> None:
    db = folder / "dex.db"
    assert dex(db, "run", "three-steps", "--input", "1").returncode == 0
    db.chmod(0o000)
    for args in (["list"], ["inspect", "x"], ["run", "three-steps", "--input", "1"]):
        one_error(dex(db, *args), f"cannot open the database {db}", "permission denied")
