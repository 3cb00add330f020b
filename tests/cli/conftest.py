"""Fixtures for the CLI tests.

Every test gets its own database in tmp_path, passed through DEX_DB; output is never a TTY
under CliRunner, so commands print plain lines. Virtual time everywhere (`--time-skip`, or
DexTestEnv) except the few two-process tests in test_subprocess.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.cli.cli_helpers import IMPORT_ERROR, INVALID_FLOW, USER_FLOWS, Cli


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "dex.db"


@pytest.fixture
def cli(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.chdir(tmp_path)  # no dex.toml of the developer's can leak in
    return Cli(db, tmp_path)


@pytest.fixture
def user_files(tmp_path: Path) -> dict[str, Path]:
    d = tmp_path / "userflows"
    d.mkdir()
    files = {"flows": d / "orders.py", "invalid": d / "broken.py", "import_error": d / "bad_import.py",
             "syntax": d / "bad_syntax.py"}
    files["flows"].write_text(textwrap.dedent(USER_FLOWS))
    files["invalid"].write_text(textwrap.dedent(INVALID_FLOW))
    files["import_error"].write_text(textwrap.dedent(IMPORT_ERROR))
    files["syntax"].write_text("x = 1\ny = (\n")
    return files


