"""Every store contract test gets a fresh database file in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dexcli.store import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "dex.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    s = Store(db)
    yield s
    s.close()
