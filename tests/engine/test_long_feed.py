"""A long feed keeps nothing per flow: a worker (every flow of the database) draining flows that
keep arriving holds, after 2N flows, the objects it held after N — no reference cycle per
attempt waiting for the collector's rare full passes, no per-flow entry in a dict that only
grows. Virtual time; the same engine as `dex worker`'s, with its GC settings."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from dexcli.engine.clock import Clock
from dexcli.engine.clock import run as run_on_clock
from dexcli.engine.core import Engine
from dexcli.engine.process import GC_THRESHOLDS
from dexcli.sdk.registry import Registry
from dexcli.store import Store
from dexcli_flows.polling import PollingFlow
from dexcli_flows.three_steps import ThreeStepFlow

N = 150
BATCH = 50


class Feed:
    """Flows started in batches, each batch drained by a worker's drive (all flows, until idle)."""

    def __init__(self, db: Path) -> None:
        self.store = Store(db)
        self.engine = Engine(self.store, Clock.virtual(), Registry([], allow_async_handlers=True))
        self.started = 0

    def __call__(self, n: int) -> None:
        engine, flows = self.engine, (ThreeStepFlow(), PollingFlow())  # sync steps; generator and async ones

        async def go() -> None:
            for _ in range(n // BATCH):
                for _ in range(BATCH):
                    i = self.started
                    self.started += 1
                    flow = flows[i % 2]
                    engine.start_flow(flow, f"f{i}", i if flow is flows[0] else None,
                                      flow_ref="name:three-steps" if flow is flows[0] else "name:polling")
                await engine.drive_async(None, until_idle=True, release=False)

        run_on_clock(go, engine.clock)


@pytest.fixture
def feed(tmp_path: Path) -> Iterator[Feed]:
    f = Feed(tmp_path / "dex.db")
    f(BATCH)  # imports, caches, the first pages
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield f
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
        f.store.close()


def engine_objects() -> Counter[str]:
    """The objects of dexcli's own types alive now, garbage not yet collected included."""
    return Counter(type(o).__qualname__ for o in gc.get_objects() if type(o).__module__.startswith("dexcli."))


def test_a_long_feed_leaves_no_cycles_of_engine_objects_behind(feed: Feed) -> None:
    gc.collect()
    gc.disable()  # what the collector would find later is counted too
    feed(N)
    after_n = engine_objects()
    feed(N)
    after_2n = engine_objects()
    grown = {k: after_2n[k] - after_n[k] for k in after_2n if after_2n[k] - after_n[k] > 2}
    assert grown == {}, f"per {N} more flows, still alive: {grown}"


def test_a_long_feed_keeps_no_entry_per_flow_it_closed(feed: Feed) -> None:
    """The engine's per-flow clock offsets are of flows it still drives, not of every flow it
    ever claimed (each entry a flow id and a float, kept for good)."""
    feed(N)
    assert len(feed.engine._offsets) <= BATCH, len(feed.engine._offsets)
