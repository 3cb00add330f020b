"""Shell completion of flow ids: the most recent flows of the database the command line names
(newest first, at most RECENT, running ones only where only they apply), offered by `inspect`,
`watch`, `resume`, `stop`, `rpc`, `skip-timer`, `wait` and a plugin's `complete-job`, and never
an error in the user's prompt; the plugins' flow names after `dex run`, a flow's RPCs after
`dex rpc FLOW`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from dexcli.cli.completion import RECENT, complete_flow_id, complete_running_flow_id, recent_flow_ids
from dexcli.cli.main import app
from dexcli.store import FlowState, Store
from tests.cli.cli_helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def flows(db: Path) -> Path:
    """o1..o3 (o2 COMPLETED), an archived run of o1, and p1 — started in that order."""
    store = Store(db)
    with store.tx() as tx:
        for i, fid in enumerate(["o1", "o1$run-0", "o2", "o3", "p1"]):
            tx.insert_flow_if_new(fid, f"run-{fid}", "Orders", None, "1", f"req-{fid}", 100.0 + i)
        tx.close_flow("o2", FlowState.COMPLETED, 200.0, None, None)
    store.close()
    return db


def test_recent_flow_ids_are_newest_first_with_type_and_status(flows: Path) -> None:
    assert recent_flow_ids(str(flows), "o") == [
        ("o3", "Orders · RUNNING"), ("o2", "Orders · COMPLETED"), ("o1", "Orders · RUNNING")]
    assert [f for f, _ in recent_flow_ids(str(flows), "o", running_only=True)] == ["o3", "o1"]
    assert [f for f, _ in recent_flow_ids(str(flows), "")] == ["p1", "o3", "o2", "o1"]
    assert recent_flow_ids(str(flows), "o1$") == [("o1$run-0", "Orders · RUNNING")]  # an old run, once asked


def test_only_the_most_recent_flows_are_read(db: Path) -> None:
    store = Store(db)
    with store.tx() as tx:
        for i in range(RECENT + 5):
            tx.insert_flow_if_new(f"f{i:03}", f"run-{i}", "Orders", None, "1", f"req-{i}", float(i))
    store.close()
    offered = [f for f, _ in recent_flow_ids(str(db), "f")]
    assert len(offered) == RECENT and offered[0] == f"f{RECENT + 4:03}" and "f004" not in offered


def test_no_database_or_a_broken_one_offers_nothing(tmp_path: Path) -> None:
    assert recent_flow_ids(str(tmp_path / "missing.db"), "") == []
    assert not (tmp_path / "missing.db").exists()  # completing does not create a database
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    assert recent_flow_ids(str(junk), "") == []


def test_the_completion_functions_read_the_db_option_of_the_command_line(flows: Path) -> None:
    ctx = SimpleNamespace(find_root=lambda: SimpleNamespace(params={"db": str(flows)}))
    assert [f for f, _ in complete_flow_id(ctx, [], "o")] == ["o3", "o2", "o1"]
    assert [f for f, _ in complete_running_flow_id(ctx, [], None)] == ["p1", "o3", "o1"]


def _offered(db: Path, command: str, incomplete: str) -> list[str]:
    """What `dex --db DB COMMAND <incomplete><TAB>` offers for the command's first argument,
    asked of the argument itself as click's shell completion asks it."""
    from typer.main import get_command

    group = get_command(app)
    root = group.make_context("dex", ["--db", str(db), command], resilient_parsing=True)
    cmd = group.get_command(root, command)
    ctx = cmd.make_context(command, [], parent=root, resilient_parsing=True)
    arg = next(p for p in cmd.params if p.param_type_name == "argument")
    return [item.value for item in arg.shell_complete(ctx, incomplete)]


@pytest.mark.parametrize("command", ["inspect", "watch", "rpc", "wait", "config"])
def test_commands_on_any_flow_complete_recent_flows(flows: Path, command: str) -> None:
    assert _offered(flows, command, "o") == ["o3", "o2", "o1"]


@pytest.mark.parametrize("command", ["resume", "stop", "skip-timer", "complete-job", "continue-as-new"])
def test_commands_on_a_running_flow_complete_running_flows(flows: Path, command: str) -> None:
    assert _offered(flows, command, "") == ["p1", "o3", "o1"]


def _tab(db: Path, words: str) -> list[str]:
    """What bash's TAB gets from `dex` for the command line `words` (the last word incomplete)."""
    env = {**subprocess_env(db), "_DEX_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split(" ")) - 1)}
    code = "import sys; sys.argv[0] = 'dex'; from dexcli.cli.main import main; main()"  # as the dex script
    res = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (0, ""), res
    return res.stdout.split()


def test_tab_in_bash_offers_the_flow_ids(flows: Path) -> None:
    assert _tab(flows, "dex inspect o") == ["o3", "o2", "o1"]
    assert _tab(flows, "dex complete-job ") == ["p1", "o3", "o1"]  # a plugin's command: running flows


def test_tab_after_run_offers_the_flow_names(db: Path) -> None:
    assert _tab(db, "dex run ") == ["approval", "fan-out", "payment", "polling", "three-steps"]
    assert _tab(db, "dex run p") == ["payment", "polling"]


def test_tab_after_rpc_and_a_flow_offers_that_flows_rpcs(cli, db: Path) -> None:
    from tests.cli.cli_helpers import start_flow

    start_flow(db, "approval", "a", {"title": "t"})
    start_flow(db, "payment", "pay", {"payment_id": "p-1", "amount": 1})
    assert _tab(db, "dex rpc a ") == ["approve", "pending", "reject"]
    assert _tab(db, "dex rpc a p") == ["pending"]
    assert _tab(db, "dex rpc pay ") == ["settled"]
    assert _tab(db, "dex rpc nosuch ") == []  # an unknown flow: nothing (and no files)
