"""Text from the database never drives the terminal: a flow id with a control character is
refused at start (`dex run` and Client.start_flow alike), and what is stored — error messages,
Stream text, flow ids of an older database — prints escaped, with Rich markup in it literal."""

from __future__ import annotations

import sqlite3
import textwrap

import pytest

from dexcli import ValueMappingError
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.cli.cli_helpers import assert_error

HOSTILE = "\x1b]0;PWNED\x07\x1b[2J[bold]loud[/bold]\nforged line"
CONTROL = ("\x1b", "\x07", "\x9b")

FLOW = f'''
from collections.abc import Generator

from dexcli import Context, Flow, PersistenceSchema, Step, StepDecision, StepList, StepOutput, Stream, force_fail

NOTES = Stream("Notes", str, 1 << 20)
HOSTILE = {HOSTILE!r}


class Say(Step[int]):
    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        yield NOTES.write(context, HOSTILE)
        return force_fail(HOSTILE)


class SayFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Say())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NOTES)
'''


def raw_control(text: str) -> list[str]:
    return [c for c in CONTROL if c in text]


@pytest.mark.parametrize("flow_id", ["t\x1b]0;PWNED\x07", "two\nlines", "bell\x07", "csi\x9b2J", "nul\x00"])
def test_a_flow_id_with_a_control_character_is_refused_at_start(cli, flow_id):
    line = assert_error(cli("run", "three-steps", "--flow-id", flow_id, "--input", "1"), 2, "non-printable character")
    assert not raw_control(line)
    assert cli.ok("list").stdout.startswith("no flows")  # nothing was started


def test_client_start_flow_refuses_it_too(tmp_path):
    with DexTestEnv(tmp_path / "dex.db") as env, pytest.raises(ValueMappingError, match="non-printable"):
        env.client.start_flow(ThreeStepFlow(), "a\x1b[2Jb", 1)


@pytest.fixture
def hostile(cli, tmp_path):
    """A FAILED flow whose error message and Stream message are HOSTILE."""
    path = tmp_path / "say.py"
    path.write_text(textwrap.dedent(FLOW))
    res = cli("run", "--file", f"{path}:SayFlow", "--flow-id", "say", "--input", "1", "--time-skip")
    assert res.exit_code == 1, res.output
    assert not raw_control(res.stdout + res.stderr), repr(res.stdout)
    return cli


@pytest.mark.parametrize("args", [["list"], ["inspect", "say"], ["inspect", "say", "--timeline"], ["watch", "say"]])
def test_stored_text_prints_escaped(hostile, args):
    res = hostile(*args)
    out = res.stdout + res.stderr
    assert not raw_control(out), repr(out)
    if "--timeline" not in args:  # (the timeline shows no messages)
        assert "\\x1b]0;PWNED\\x07" in out
    assert "\nforged line" not in out  # the newline is shown, not obeyed


def test_markup_in_stored_text_prints_as_written(hostile):
    res = hostile.ok("inspect", "say")
    assert "[bold]loud[/bold]" in res.stdout


def test_an_old_database_with_such_a_flow_id_prints_it_escaped(hostile, db):
    conn = sqlite3.connect(db)
    with conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            if "flow_id" in [c[1] for c in conn.execute(f"PRAGMA table_info({table})")]:
                conn.execute(f"UPDATE {table} SET flow_id = ? WHERE flow_id = 'say'", ("say\x1b[2J",))
    conn.close()
    for args in (["list"], ["inspect", "say\x1b[2J"], ["time"]):
        res = hostile(*args)
        assert not raw_control(res.stdout + res.stderr), repr(res.stdout)
    assert "say\\x1b[2J" in hostile.ok("list").stdout
    line = assert_error(hostile("stop", "say\x1b[2J"), 4)
    assert "say\\x1b[2J" in line and not raw_control(line)


def test_the_worker_prints_a_stored_message_escaped_and_its_markup_literal(cli, db, tmp_path):
    """`dex worker` prints each flow it closes as a line of its own (markup was parsed there)."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_flow
    from dexcli.store import Store

    path = tmp_path / "say.py"
    path.write_text(textwrap.dedent(FLOW))
    store = Store(db)
    try:
        flow, ref = load_flow(file=f"{path}:SayFlow")
        build_engine(store, time_skip=False).start_flow(flow, "queued", 1, flow_ref=ref)
    finally:
        store.close()
    res = cli.ok("worker", "--until-idle", "--time-skip")
    assert not raw_control(res.stdout + res.stderr), repr(res.stdout)
    assert "queued: FAILED — \\x1b]0;PWNED\\x07\\x1b[2J[bold]loud[/bold]\\nforged line" in res.stdout
