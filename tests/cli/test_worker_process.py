"""`dex worker` tunes its process's garbage collector for many attempts in flight
(dexcli.engine.process); `dex run` leaves it as the process had it. (In-process: each test puts
back what it found.)"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dexcli.engine.process import GC_THRESHOLDS
from tests.cli.cli_helpers import Cli

DEFAULTS = (700, 10, 10)  # CPython's


@pytest.fixture
def untuned() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.set_threshold(*DEFAULTS)
    gc.unfreeze()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def test_worker_freezes_what_it_set_up_and_collects_less_often(cli: Cli, untuned: None) -> None:
    cli.ok("start", "three-steps", "--input", "1", "--flow-id", "t1")
    assert gc.get_freeze_count() == 0
    assert "t1: COMPLETED" in cli.ok("worker", "--until-idle").stdout
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > 0


def test_run_leaves_the_collector_as_it_was(cli: Cli, untuned: None) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1", "--time-skip")
    assert gc.get_threshold() == DEFAULTS
    assert gc.get_freeze_count() == 0
