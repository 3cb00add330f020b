"""`dex inspect FLOW_ID [--json]` and `dex list [options]` are served without typer
(dexcli.cli.quick): the same output, errors and exit codes as the typer commands, which still
own help, usage errors and --timeline."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dexcli.cli.quick import LIST_DEFAULTS, parse, parse_list
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
        env.run(ThreeStepFlow(), input=2, flow_id="three-b")
    return db


def typer_dex(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command line through the typer app (what `dex` runs when the quick path declines)."""
    code = f"import sys\nfrom dexcli.cli.main import app\nsys.argv = ['dex', *{list(args)!r}]\napp()\n"
    return subprocess.run([sys.executable, "-c", code], env=subprocess_env(db), capture_output=True, text=True,
                          timeout=60)


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


@pytest.mark.parametrize("args", [
    ("list",), ("list", "--json"), ("list", "--status", "completed"), ("list", "--status=RUNNING"),
    ("list", "--type", "ThreeStepFlow", "--limit", "1"), ("list", "--limit=1", "--json"),
    ("list", "--status", "bogus"), ("list", "--page-token", "x"),
    ("list", "--query", "FlowStatus = 'COMPLETED'"), ("list", "-q", "FlowId = 'three'", "--json"),
    ("list", "--query", "FlowStatus = 'COMPLETED'", "--page-size", "1"),
    ("list", "--query", "FlowStatus = 'COMPLETED'", "--page-size", "1", "--all", "--include-continued-as-new"),
    ("list", "--query", "FlowStatus = 'COMPLETED'", "--status", "RUNNING"),
    ("list", "--query", "Nope = 1"), ("list", "--query", "FlowStatus = "), ("list", "--query="),
    ("list", "--query", "FlowId = 'three'", "--page-token", "not-a-token"),
])
def test_the_quick_list_prints_what_the_typer_command_prints(done_db: Path, args: tuple[str, ...]) -> None:
    assert parse_list(list(args)) is not None  # served by the quick path
    quick, typer_path = dex(done_db, *args), typer_dex(done_db, *args)
    assert (quick.returncode, quick.stdout, quick.stderr) == (
        typer_path.returncode, typer_path.stdout, typer_path.stderr)


def test_the_quick_list_shows_the_flows(done_db: Path) -> None:
    res = dex(done_db, "list")
    assert res.returncode == 0
    assert [line.split()[0] for line in res.stdout.splitlines()] == ["flow", "three-b", "three"]
    res = dex(done_db, "list", "--query", "FlowStatus = 'COMPLETED'", "--page-size", "1")
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 2
    assert res.stderr.startswith("dex: more flows match: --page-token ")


@pytest.mark.parametrize("args", [("inspect", "three", "--json"), ("list",), ("list", "--json"),
                                  ("list", "--query", "FlowStatus = 'COMPLETED'")])
def test_what_loads_neither_typer_nor_rich(done_db: Path, args: tuple[str, ...]) -> None:
    """Plain text (stdout is not a terminal) and JSON: neither typer nor Rich is imported."""
    code = (f"import sys\nfrom dexcli.cli.main import main\nsys.argv = ['dex', *{list(args)!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n"
            "    print(e.code, 'typer' in sys.modules, 'rich' in sys.modules, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], env=subprocess_env(done_db), capture_output=True, text=True,
                         timeout=60)
    assert res.stderr.split()[-3:] == ["0", "False", "False"], res.stderr


def test_inspect_text_does_not_load_typer(done_db: Path) -> None:
    code = ("import sys\nfrom dexcli.cli.main import main\nsys.argv = ['dex', 'inspect', 'three']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    print(e.code, 'typer' in sys.modules, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], env=subprocess_env(done_db), capture_output=True, text=True,
                         timeout=60)
    assert res.stderr.split() == ["0", "False"], res.stderr


@pytest.mark.parametrize(("args", "given"), [
    (["list"], {}),
    (["--db", "x.db", "list", "--json"], {"json_out": True}),
    (["list", "--status", "FAILED", "--type=T", "--limit", "5"], {"status": "FAILED", "flow_type": "T", "limit": 5}),
    (["list", "-q", "A = 1", "--page-size=3", "--page-token", "t", "--all", "--include-continued-as-new"],
     {"query": "A = 1", "page_size": 3, "page_token": "t", "all_pages": True, "continued": True}),
    (["list", "--query="], {"query": ""}),
])
def test_what_the_quick_list_serves(args: list[str], given: dict[str, object]) -> None:
    db = "x.db" if "x.db" in args else None
    assert parse_list(args) == (db, {**LIST_DEFAULTS, **given})


@pytest.mark.parametrize("args", [
    ["list", "--help"], ["list", "extra"], ["list", "--limit", "0"], ["list", "--limit", "x"],
    ["list", "--limit", "1000001"], ["list", "--page-size", "1001"], ["list", "--status"],
    ["list", "--status", "--json"], ["list", "--json", "--json"], ["list", "--limit", "1", "--limit", "2"],
    ["list", "--", "--json"], ["list", "-q=x"], ["list", "--json=1"], ["list", "--nope"], ["inspect", "f"],
])
def test_what_the_quick_list_leaves_to_typer(args: list[str]) -> None:
    assert parse_list(args) is None
