from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.attrstore.postgres import postgres_server


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    with postgres_server() as dsn:
        yield dsn
