"""What a user sees of the Attribute Store: dex.toml's [attribute_store] read (a mistake in it
is one line, exit 2; a store that cannot be opened one line, exit 5), `dex run` and `dex rpc`
projecting synced attributes, `dex inspect` saying where each went."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.attrstore.stores import rows, sqlite_store
from tests.cli.cli_helpers import Cli, assert_error

FLOW = '''
from dexcli import Attribute, Context, Flow, PersistenceSchema, RPCResult, Step, StepDecision, StepList
from dexcli import graceful_complete, rpc

email = Attribute("email", str, sync_to_attribute_store=True)
short = Attribute("short", str, sync_to_attribute_store=True)


class Save(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        email.set(context, input)
        return graceful_complete(input)


class ProfileFlow(Flow[str]):
    def __init__(self) -> None:
        self.save = Save()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.save)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email, short)


class Entity(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.empty()

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(email, short)

    @rpc
    def rename(self, context: Context, value: str) -> RPCResult[None]:
        email.set(context, value)
        short.set(context, value)
        return RPCResult(None)
'''

TOML = '''db = "dex.db"
[attribute_store.stores.profiles]
path = "profiles.db"
table_name = "profiles"
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Cli, Path]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "profile.py").write_text(textwrap.dedent(FLOW))
    (tmp_path / "dex.toml").write_text(TOML)
    (tmp_path / "dex.toml").chmod(0o644)
    sqlite_store(tmp_path / "profiles.db")
    return Cli(tmp_path / "dex.db", tmp_path), tmp_path


def test_run_projects_and_inspect_says_where_it_went(project: tuple[Cli, Path]) -> None:
    cli, root = project
    cli.ok("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--flow-id", "u1", "--input", '"ada@x"', db=False)
    assert rows(root / "profiles.db")["u1"]["email"] == "ada@x"
    snap = cli.json("inspect", "u1", "--json", db=False)
    assert snap["state"]["attributeStore"] == [
        {"key": "email", "status": "SYNCED", "stores": ["profiles"], "attempts": 0, "error": None}]
    shown = cli.ok("inspect", "u1", db=False).stdout
    assert "Attribute Store" in shown and "email → synced to profiles" in shown


def test_an_rpc_projects_and_a_value_the_store_cannot_take_is_shown_skipped(project: tuple[Cli, Path]) -> None:
    cli, root = project
    cli.ok("start", "--file", f"{root / 'profile.py'}:Entity", "--flow-id", "e1", db=False)
    cli.ok("rpc", "e1", "rename", "--input", '"toolong"', "--file", f"{root / 'profile.py'}:Entity", db=False)
    assert rows(root / "profiles.db")["e1"]["email"] == "toolong"
    shown = cli.ok("inspect", "e1", db=False).stdout
    assert "short → skipped: profiles: text longer than the column" in shown


@pytest.mark.parametrize(("toml", "fragment"), [
    ('[attribute_store.stores.p]\ntype = "mysql"\ndsn = "x"\ntable_name = "t"\n', "does not write to MySQL"),
    ('[attribute_store.stores.p]\npath = "profiles.db"\n', "needs table_name"),
    ('[attribute_store.stores.p]\ntable_name = "t"\n', "a sqlite store needs path"),
    ('[attribute_store.stores.p]\npath = "profiles.db"\ntable_name = "t"\nport = 1\n', "unknown key 'port'"),
    ('[attribute_store]\ndefault = "q"\n[attribute_store.stores.p]\npath = "profiles.db"\ntable_name = "t"\n',
     "default 'q' is not one of its stores"),
    ('[attribute_store.stores.p]\npath = "dex.db"\ntable_name = "t"\n', "is the dex database itself"),
])
def test_a_mistake_in_dex_toml_is_one_line_and_exit_2(project: tuple[Cli, Path], toml: str, fragment: str) -> None:
    cli, root = project
    (root / "dex.toml").write_text('db = "dex.db"\n' + toml)
    res = cli("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--input", '"x"', db=False)
    assert_error(res, 2, fragment)


def test_a_store_that_cannot_be_opened_is_one_line_and_exit_5(project: tuple[Cli, Path]) -> None:
    cli, root = project
    (root / "dex.toml").write_text(TOML.replace("profiles.db", "gone.db"))
    res = cli("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--input", '"x"', db=False)
    assert_error(res, 5, "Attribute Store 'profiles'", "no SQLite database at")
    (root / "dex.toml").write_text('db = "dex.db"\n[attribute_store.stores.pg]\ntype = "postgres"\n'
                                   'dsn = "postgresql://u:secret@127.0.0.1:1/x"\ntable_name = "t"\n')
    res = cli("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--input", '"x"', db=False)
    line = assert_error(res, 5, "Attribute Store 'pg'", "cannot connect")
    assert "secret" not in line


def test_a_projection_given_up_is_shown_by_inspect_and_doctor_and_written_by_the_next_command(
        project: tuple[Cli, Path]) -> None:
    """How the engine gives one up is test_postgres_store's; here what the user sees of it."""
    import sqlite3

    cli, root = project
    cli.ok("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--flow-id", "u1", "--input", '"ada@x"', db=False)
    with sqlite3.connect(root / "profiles.db") as store:
        store.execute("UPDATE profiles SET email = 'stale' WHERE flow_id = 'u1'")
    why = "given up after 128 failed attempts (about an hour): Attribute Store 'profiles': upsert failed"
    with sqlite3.connect(root / "dex.db") as db:
        db.execute("UPDATE attribute_sync SET status = 'FAILED', attempts = 128, error = ?", (why,))
    assert f"email → failed: {why}" in cli.ok("inspect", "u1", db=False).stdout
    res = cli("doctor", db=False)
    assert res.exit_code == 1 and f"u1: Attribute Store projection of 'email' {why}" in res.stdout
    cli.ok("run", "--file", f"{root / 'profile.py'}:ProfileFlow", "--flow-id", "u2", "--input", '"b@x"', db=False)
    assert rows(root / "profiles.db")["u1"]["email"] == "ada@x"  # kept, and written once the stores opened
    assert cli.json("inspect", "u1", "--json", db=False)["state"]["attributeStore"][0]["status"] == "SYNCED"
    cli.ok("doctor", db=False)
