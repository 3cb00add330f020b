"""`dex worker` tunes its process's garbage collector for many attempts in flight
(dexcli.engine.process); `dex run` leaves it as the process had it. (In-process: each test puts
back the thresholds it found; what a worker froze stays frozen, as after the other in-process
worker tests: unfrozen, it would all be the collector's again.)"""

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
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def test_worker_freezes_what_it_set_up_and_collects_less_often(cli: Cli, untuned: None) -> None:
    cli.ok("start", "three-steps", "--input", "1", "--flow-id", "t1")
    frozen = gc.get_freeze_count()
    assert "t1: COMPLETED" in cli.ok("worker", "--until-idle").stdout
    assert gc.get_threshold() == GC_THRESHOLDS
    assert gc.get_freeze_count() > frozen  # what it set up, out of later collections


def test_run_leaves_the_collector_as_it_was(cli: Cli, untuned: None) -> None:
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "t1", "--time-skip")
    assert gc.get_threshold() == DEFAULTS  # (what is frozen only shrinks as frozen objects die)
