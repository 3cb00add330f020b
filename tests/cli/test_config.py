"""Where the database is: --db, else DEX_DB, else dex.toml (current folder or a parent), else ~/.dex/dex.db."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexcli.cli.config import format_duration, parse_duration, resolve_db
from dexcli.cli.errors import UsageError


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
    monkeypatch.setenv("DEX_DB", "")  # empty means unset
    assert resolve_db(None) == (project / "toml.db", str(project / "dex.toml"))


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
