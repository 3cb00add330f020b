"""One exit-code scheme for every command (`dex --help`, README "Exit codes"): 3 for a flow that is
not there, 4 for one that has ended, 5 for the environment, 70 for a bug in dex — never 1,
which says the flow failed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import assert_error, drive_until, start_flow, subprocess_env

# Each command that acts on a flow, with the closed flow it is given (fixture `closed`) and
# what it says of it. `{id}` is that flow's id.
ACTING = {
    "stop": (["stop", "{id}"], "approval"),
    "rpc": (["rpc", "{id}", "approve", "--input", '"dana"'], "approval"),
    "skip-timer": (["skip-timer", "{id}", "AwaitDecision-1", "--index", "0"], "approval"),
    "complete-job": (["complete-job", "{id}"], "polling"),
    "time skip": (["time", "skip", "1m", "{id}"], "polling"),
    "wait": (["wait", "{id}", "--attribute", "settled_total", "--equals", "1", "--timeout", "1s"], "payment"),
}
# Commands that show a flow: one that has ended is shown, with the code of how it ended.
SHOWING = {
    "inspect": ["inspect", "{id}"],
    "inspect --json": ["inspect", "{id}", "--json"],
    "watch": ["watch", "{id}"],
    "resume": ["resume", "{id}"],
    "doctor": ["doctor", "{id}"],
}
NOT_FOUND_ONLY = {"time reset": ["time", "reset", "{id}"]}


@pytest.fixture
def closed(cli):
    """One COMPLETED flow of each example the commands need."""
    cli.ok("run", "approval", "--flow-id", "approval", "--input", '{"title": "t", "expire_after_seconds": 1}',
           "--time-skip")
    cli.ok("run", "polling", "--flow-id", "polling", "--job-duration", "3s", "--time-skip")
    cli.ok("run", "payment", "--flow-id", "payment", "--input", '{"payment_id": "p", "amount": 5}', "--time-skip")
    return cli


def _args(template: list[str], flow_id: str) -> list[str]:
    return [a.replace("{id}", flow_id) for a in template]


@pytest.mark.parametrize("name", sorted(ACTING))
def test_a_command_given_a_flow_that_has_ended_exits_4(closed, name):
    template, flow_id = ACTING[name]
    assert_error(closed(*_args(template, flow_id)), 4, flow_id, "COMPLETED")


@pytest.mark.parametrize("name", sorted({**ACTING, **SHOWING, **NOT_FOUND_ONLY}))
def test_a_command_given_a_flow_id_that_does_not_exist_exits_3(closed, name):
    template = {**{k: v[0] for k, v in ACTING.items()}, **SHOWING, **NOT_FOUND_ONLY}[name]
    assert_error(closed(*_args(template, "ghost")), 3, "'ghost'")


@pytest.mark.parametrize("name", sorted(SHOWING))
def test_a_command_that_shows_a_flow_that_has_ended_exits_0(closed, name):
    closed.ok(*_args(SHOWING[name], "polling"))


def test_a_timer_that_already_fired_exits_4_one_that_does_not_exist_3(cli, db):
    start_flow(db, "approval", "a", input={"title": "t"})
    drive_until(db, "a", lambda store: store.steps_of("a")[0].status.value == "WAITING")
    assert_error(cli("skip-timer", "a", "AwaitDecision-1", "--index", "7"), 3, "no timer with index 7")
    cli.ok("skip-timer", "a", "AwaitDecision-1", "--index", "0")
    assert_error(cli("skip-timer", "a", "AwaitDecision-1", "--index", "0"), 4, "AwaitDecision-1")


# ------------------------------------------------------------------------- internal errors
def _dex_with(db: Path, patch: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real `dex` entry point (dexcli.cli.main.main) in a process of its own, after `patch`
    (Python run first: it plants the bug)."""
    code = textwrap.dedent(patch) + textwrap.dedent("""
        import sys
        from dexcli.cli.main import main
        sys.argv = ['dex', *sys.argv[1:]]
        main()
        """)
    return subprocess.run([sys.executable, "-c", code, *args], env={**subprocess_env(db), **(env or {})},
                          capture_output=True, text=True, timeout=60)


BUG = """
from dexcli.store import Store

def broken(self, *args, **kwargs):
    raise KeyError("flow_type")

Store.get_flow = broken
Store.list_flows = broken
"""


@pytest.mark.parametrize("args", [["list"], ["inspect", "done"], ["inspect", "done", "--timeline"]])
def test_an_unexpected_exception_is_an_internal_error_exit_70_never_1(tmp_path, args):
    db = tmp_path / "dex.db"
    ok = subprocess.run([sys.executable, "-m", "dexcli", "run", "three-steps", "--flow-id", "done", "--input", "1"],
                        env=subprocess_env(db), capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    res = _dex_with(db, BUG, *args)
    assert res.returncode == 70, (res.returncode, res.stderr)
    assert res.stderr.splitlines() == [
        "dex: error: internal error: KeyError: 'flow_type' (a bug in dex: please report it; DEX_DEBUG=1 shows the "
        "traceback)"]
    debug = _dex_with(db, BUG, *args, env={"DEX_DEBUG": "1"})
    assert debug.returncode == 70
    assert "Traceback (most recent call last)" in debug.stderr and "in broken" in debug.stderr
    assert debug.stderr.splitlines()[-1].startswith("dex: error: internal error: KeyError")


def test_the_help_and_the_readme_give_the_same_scheme(cli):
    out = cli.ok("--help").stdout
    for fragment in ("3 not found", "4 exists but closed", "5 environment", "70 internal error", "DEX_DEBUG"):
        assert fragment in " ".join(out.split()), fragment
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme[readme.index("## Exit codes"):]
    for row in ("| 3 | not found", "| 4 | exists but closed", "| 5 | environment", "| 70 | internal error"):
        assert row in table, row
