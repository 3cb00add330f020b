"""Where the database is: --db, else DEX_DB, else dex.toml (current folder or a parent), else ~/.dex/dex.db."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.cli.config import find_config, format_duration, parse_duration, resolve_db
from dexcli.cli.errors import UsageError
from tests.cli.cli_helpers import subprocess_env


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.delenv("DEX_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "proj"
    (root / "src" / "deep").mkdir(parents=True)
    return root


def test_default_is_home(project, monkeypatch, tmp_path):
    monkeypatch.chdir(project)
    assert resolve_db(None) == (tmp_path / "home" / ".dex" / "dex.db", "default")


def test_dex_toml_in_a_parent_folder_relative_to_the_file(project, monkeypatch):
    (project / "dex.toml").write_text('db = "data/flows.db"\n')
    monkeypatch.chdir(project / "src" / "deep")
    assert resolve_db(None) == (project / "data" / "flows.db", str(project / "dex.toml"))


def test_dex_toml_absolute_and_home_paths(project, monkeypatch, tmp_path):
    (project / "dex.toml").write_text('db = "~/x.db"\n')
    monkeypatch.chdir(project)
    assert resolve_db(None)[0] == tmp_path / "home" / "x.db"
    (project / "dex.toml").write_text(f'db = "{tmp_path / "abs.db"}"\n')
    assert resolve_db(None)[0] == tmp_path / "abs.db"


def test_dex_toml_without_db_falls_back_to_default(project, monkeypatch, tmp_path):
    (project / "dex.toml").write_text('synchronous = "FULL"\n')
    monkeypatch.chdir(project)
    assert resolve_db(None)[1] == "default"


def test_env_beats_dex_toml_and_flag_beats_env(project, monkeypatch, tmp_path):
    (project / "dex.toml").write_text('db = "toml.db"\n')
    monkeypatch.chdir(project)
    monkeypatch.setenv("DEX_DB", str(tmp_path / "env.db"))
    assert resolve_db(None) == (tmp_path / "env.db", "DEX_DB")
    assert resolve_db(str(tmp_path / "flag.db")) == (tmp_path / "flag.db", "--db")
    monkeypatch.delenv("DEX_DB")
    assert resolve_db(None) == (project / "toml.db", str(project / "dex.toml"))


def test_an_empty_path_is_an_error_not_the_next_source(project, monkeypatch):
    """`--db "$UNSET"` or `DEX_DB= dex ...` must not quietly use the default database."""
    (project / "dex.toml").write_text('db = "toml.db"\n')
    monkeypatch.chdir(project)
    for flag in ("", "  "):
        with pytest.raises(UsageError, match="--db is empty"):
            resolve_db(flag)
    monkeypatch.setenv("DEX_DB", "")
    with pytest.raises(UsageError, match="DEX_DB is empty"):
        resolve_db(None)
    monkeypatch.delenv("DEX_DB")
    (project / "dex.toml").write_text('db = ""\n')
    with pytest.raises(UsageError, match="dex.toml: db is empty"):
        resolve_db(None)


def test_empty_db_on_the_command_line(cli):
    from tests.cli.cli_helpers import assert_error

    home = cli.cwd / "home"
    assert_error(cli("--db", "", "list"), 2, "--db is empty")
    assert_error(cli("list", "--db="), 2, "--db is empty")
    assert_error(cli("--db", "", "run", "three-steps", "--input", "1", env={"HOME": str(home)}), 2, "--db is empty")
    assert_error(cli("run", "three-steps", "--input", "1", env={"DEX_DB": "", "HOME": str(home)}), 2,
                 "DEX_DB is empty")
    assert not home.exists()  # the default database was not created


def test_busy_timeout_setting(project, monkeypatch):
    from dexcli.cli.config import busy_timeout_setting

    monkeypatch.chdir(project)
    monkeypatch.delenv("DEX_BUSY_TIMEOUT", raising=False)
    assert busy_timeout_setting() == 30
    (project / "dex.toml").write_text("busy_timeout = 5\n")
    assert busy_timeout_setting() == 5
    monkeypatch.setenv("DEX_BUSY_TIMEOUT", "0.5")
    assert busy_timeout_setting() == 0.5
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("DEX_BUSY_TIMEOUT", bad)
        with pytest.raises(UsageError, match="busy timeout must be a number of seconds"):
            busy_timeout_setting()


def test_the_cli_follows_the_same_order(cli, tmp_path, monkeypatch):
    """A flow run with each source lands in that source's database."""
    (tmp_path / "dex.toml").write_text('db = "toml.db"\n')
    cli.ok("run", "three-steps", "--flow-id", "t", "--input", "1", db=False)
    cli.ok("run", "three-steps", "--flow-id", "e", "--input", "1", env={"DEX_DB": str(tmp_path / "env.db")})
    cli.ok("--db", str(tmp_path / "flag.db"), "run", "three-steps", "--flow-id", "f", "--input", "1",
           env={"DEX_DB": str(tmp_path / "env.db")})
    for name, fid in (("toml.db", "t"), ("env.db", "e"), ("flag.db", "f")):
        rows = cli.json("--db", str(tmp_path / name), "list", "--json")
        assert [r["flowId"] for r in rows] == [fid], name
    first_line = cli.ok("run", "three-steps", "--input", "1", db=False).stdout.splitlines()[0]
    assert first_line.endswith(f"db {tmp_path / 'toml.db'}")


def test_synchronous_setting(cli, tmp_path):
    (tmp_path / "dex.toml").write_text('db = "x.db"\nsynchronous = "sometimes"\n')
    res = cli("run", "three-steps", "--input", "1", db=False)
    assert res.exit_code == 2 and "synchronous must be NORMAL or FULL" in res.stderr


@pytest.mark.parametrize("text, seconds", [("3s", 3), ("90s", 90), ("2m", 120), ("15m", 900), ("1h", 3600),
                                           ("1m30s", 90), ("500ms", 0.5), ("2.5", 2.5)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "3x", "s3", "-1", "1h-2m"])
def test_parse_duration_rejects(text):
    with pytest.raises(UsageError):
        parse_duration(text)


@pytest.mark.parametrize("seconds, text", [(0, "0.0 s"), (6.04, "6.0 s"), (60, "1 m"), (596, "9 m 56 s"),
                                           (3600, "1 h"), (3900, "1 h 5 m"), (-3, "0.0 s")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_home_default_is_not_created_by_resolution(project, monkeypatch, tmp_path):
    monkeypatch.chdir(project)
    resolve_db(None)
    assert not Path(tmp_path / "home").exists()


def test_a_db_in_a_missing_folder_is_created_and_said_once(cli, tmp_path):
    db = tmp_path / "new" / "sub" / "dex.db"
    first = cli.ok("--db", str(db), "run", "three-steps", "--input", "1", "--flow-id", "t", "--time-skip")
    assert first.stderr.splitlines() == [f"dex: created the folder {tmp_path / 'new'} for the new database {db}"]
    assert db.is_file()
    again = cli.ok("run", "three-steps", "--input", "1", "--flow-id", "u", "--time-skip", "--db", str(db))
    assert "created" not in again.stderr
    # a command that only reads never creates anything
    assert cli("--db", str(tmp_path / "other" / "dex.db"), "list").exit_code == 3
    assert not (tmp_path / "other").exists()


# ------------------------------------------------------------------------- trust
def _root_only() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")


def test_a_dex_toml_another_user_wrote_is_ignored(project, tmp_path):
    """In a shared folder (1777, as /tmp), another user leaves a dex.toml naming a database:
    dex ignores it, says why in one line, and uses the default."""
    _root_only()
    shared = tmp_path / "shared"
    (shared / "work").mkdir(parents=True)
    shared.chmod(0o1777)
    planted = shared / "dex.toml"
    planted.write_text(f'db = "{tmp_path / "theirs.db"}"\n')
    os.chown(planted, 65534, 65534)  # nobody's
    res = _dex(tmp_path, shared / "work", "run", "three-steps", "--input", "1")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        f"dex: warning: ignoring {planted}: it belongs to nobody (uid 65534), not to you or root; "
        "to use the database it names anyway, pass it with --db or DEX_DB"]
    assert not (tmp_path / "theirs.db").exists()
    assert (tmp_path / "home" / ".dex" / "dex.db").exists()


def test_a_dex_toml_others_can_write_is_ignored(project, tmp_path):
    (project / "dex.toml").write_text(f'db = "{tmp_path / "any.db"}"\n')
    (project / "dex.toml").chmod(0o666)
    res = _dex(tmp_path, project, "run", "three-steps", "--input", "1")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        f"dex: warning: ignoring {project / 'dex.toml'}: other users can write it (mode 0666); if you trust it: "
        f"chmod go-w {project / 'dex.toml'}"]
    assert not (tmp_path / "any.db").exists()
    (project / "dex.toml").chmod(0o644)
    res = _dex(tmp_path, project, "run", "three-steps", "--input", "1")
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert (tmp_path / "any.db").exists()


def test_a_dex_toml_of_root_is_trusted(project, tmp_path):
    _root_only()
    (project / "dex.toml").write_text(f'db = "{tmp_path / "root.db"}"\n')
    os.chown(project / "dex.toml", 0, 0)
    assert find_config(project) == project / "dex.toml"


def _dex(tmp_path: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`dex` in a real process in `cwd`, HOME in tmp_path, no DEX_DB: the database is chosen by
    the dex.toml files found from `cwd` up (or the default)."""
    env = subprocess_env(tmp_path / "unused.db")
    del env["DEX_DB"]
    env["HOME"] = str(tmp_path / "home")
    return subprocess.run([sys.executable, "-m", "dexcli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_dex_init_writes_a_dex_toml_dex_trusts_under_any_umask(cli, tmp_path):
    old = os.umask(0o002)  # group-writable files by default, as for many users with a group of their own
    try:
        cli.ok("init", db=False)
    finally:
        os.umask(old)
    assert oct((tmp_path / "dex.toml").stat().st_mode & 0o777) == oct(0o644)
    res = cli.ok("run", "three-steps", "--input", "1", db=False)
    assert "ignoring" not in res.stderr
    assert (tmp_path / ".dex" / "dex.db").exists()
