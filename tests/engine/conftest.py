"""Fixtures for the engine rule tests.

Everything runs on DexTestEnv's virtual clock: a step's `asyncio.sleep(600)` takes no wall
time, and every assertion about time is about virtual timestamps relative to the start.
"""

import pytest

from dexcli.engine.host import StoreHost
from dexcli.testing import DexTestEnv
from dexcli_flows.job_service import FakeJobService


@pytest.fixture
def env(tmp_path):
    with DexTestEnv(tmp_path / "dex.db") as e:
        e.t0 = e.clock.now()
        yield e


@pytest.fixture
def jobs(env):
    return FakeJobService(StoreHost(env.store, env.clock))
