"""`dex inspect FLOW_ID [--json]` is served without typer (dexcli.cli.quick): the same output,
errors and exit codes as the typer command, which still owns help, usage errors and --timeline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.cli.quick import parse
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.cli.cli_helpers import subprocess_env

DEX = [sys.executable, "-m", "dexcli"]


def dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DEX, *args], env=subprocess_env(db), capture_output=True, text=True, timeout=60)


def no_now(out: str) -> str:
    """`--json` carries the time it was read at."""
    return re.sub(r'"now": "[^"]*"', '"now": ""', out)


@pytest.fixture(scope="module")
def done_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("quick") / "dex.db"
    with DexTestEnv(db) as env:
        env.run(ThreeStepFlow(), input=1, flow_id="three")
    return db


@pytest.mark.parametrize("args", [("inspect", "three"), ("inspect", "three", "--json"),
                                  ("inspect", "--json", "three"), ("inspect", "nope"), ("inspect", "nope", "--json")])
def test_the_quick_path_prints_what_the_typer_command_prints(done_db: Path, args: tuple[str, ...]) -> None:
    quick = dex(done_db, *args)
    # `--` is not served by the quick path: the same command through typer
    typer_path = dex(done_db, *args[:-1], "--", args[-1]) if args[-1] != "--json" else \
        dex(done_db, "inspect", "--json", "--", args[1])
    assert (quick.returncode, no_now(quick.stdout), quick.stderr) == (
        typer_path.returncode, no_now(typer_path.stdout), typer_path.stderr)
    if "nope" in args:
        assert quick.returncode == 3 and quick.stderr.startswith("dex: error: no flow with id 'nope'")
    else:
        assert quick.returncode == 0 and "Third-1" in quick.stdout


def test_a_missing_database_is_the_same_one_line_error(tmp_path: Path) -> None:
    res = dex(tmp_path / "missing.db", "inspect", "x")
    assert res.returncode == 3
    assert res.stderr.splitlines() == [f"dex: error: no dex database at {tmp_path / 'missing.db'} "
                                       "(run a flow first, or pass --db)"]


def test_inspect_loads_neither_typer_nor_rich_for_json(done_db: Path) -> None:
    code = ("import sys\nfrom dexcli.cli.main import main\nsys.argv = ['dex', 'inspect', 'three', '--json']\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    print(e.code, 'typer' in sys.modules, 'rich' in sys.modules, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], env=subprocess_env(done_db), capture_output=True, text=True,
                         timeout=60)
    assert res.stderr.split() == ["0", "False", "False"], res.stderr


@pytest.mark.parametrize(("args", "served"), [
    (["inspect", "f"], (None, "f", False)),
    (["--db", "x.db", "inspect", "f", "--json"], ("x.db", "f", True)),
    (["inspect", "f", "--db=y.db"], ("y.db", "f", False)),
    (["inspect", "f", "--timeline"], None),
    (["inspect", "--help"], None),
    (["inspect"], None),
    (["inspect", "f", "g"], None),
    (["inspect", "--", "f"], None),
    (["list"], None),
    (["--version"], None),
    (["inspect", "f", "--db"], None),
])
def test_what_the_quick_path_serves(args: list[str], served: tuple[str | None, str, bool] | None) -> None:
    assert parse(args) == served
