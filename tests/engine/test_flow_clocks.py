"""Each flow has its own clock: a time-skipping engine moves only the flows it drives.

Real time here is a number the test moves (`Real`), shared by every engine on the database, as
wall time is shared by processes; each engine's loop runs on it plus its own skips.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dexcli.engine import transitions as t
from dexcli.engine.clock import VIRTUAL_EPOCH, Clock
from dexcli.engine.core import Engine
from dexcli.sdk.registry import Registry
from dexcli.store import AttemptOutcome, FlowState, StepState, Store
from tests.engine.engine_flows import Beat, Single

DEAD = f"{socket.gethostname()}:999999999:x"  # a process of this host that does not run
ELSEWHERE = "another-host:1:x"  # a process dex cannot look at: it may be alive


class Real:
    """Wall time, moved by the test."""

    def __init__(self) -> None:
        self.t = VIRTUAL_EPOCH

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "dex.db")
    yield s
    s.close()


def _engine(store: Store, real: Real, *, skip: bool, owner: str) -> Engine:
    clock = Clock(follow_real=True, auto_advance=skip, real=real)
    return Engine(store, clock, Registry(allow_async_handlers=True), owner=owner)


def _lease_elsewhere(store: Store, engine: Engine, flow_id: str, owner: str, now: float) -> None:
    """Lease the flow's queued step to another process (which then holds it, or died)."""
    with store.tx() as tx:
        (r,) = tx.runnable_steps(now, [flow_id], 10)
        found = engine.definitions.step_for(flow_id, r.flow_type, r.flow_ref, r.step.step_type)
        assert found is not None
        assert t.lease(tx, r, found[0], found[1], owner, now) is not None


def _step(store: Store, flow_id: str):
    (s,) = store.steps_of(flow_id)
    return s


def test_a_skip_of_one_flow_does_not_time_out_a_flow_another_engine_drives(store: Store) -> None:
    real = Real()
    a = _engine(store, real, skip=False, owner="a")
    a.start_flow(Single(Beat(None, every=5)), "A", 0)
    _lease_elsewhere(store, a, "A", ELSEWHERE, real.t)  # flow A runs in another process

    b = _engine(store, real, skip=True, owner="b")  # `dex run B --time-skip` next to it
    b.start_flow(Single(Beat(None, every=30, finish_after=600)), "B", 0)
    b.drive(["B"], until_idle=True)

    flow_b, flow_a = store.get_flow("B"), store.get_flow("A")
    assert flow_b is not None and flow_b.status is FlowState.COMPLETED and flow_b.clock_offset >= 600
    assert flow_a is not None and flow_a.clock_offset == 0.0 and real.t == VIRTUAL_EPOCH
    assert flow_b.start_time == VIRTUAL_EPOCH  # the start is real time; the rest is B's own

    c = _engine(store, real, skip=False, owner="c")  # any third process looking at flow A
    c._reap(c.clock.real(), ["A"])
    assert _step(store, "A").status is StepState.RUNNING and _step(store, "A").lease_owner == ELSEWHERE
    real.t += 61  # A's own 60 s heartbeat timeout, in real time, still counts
    c._reap(c.clock.real(), ["A"])
    assert [x.outcome for x in store.attempts_of("A")] == [AttemptOutcome.LOST]


def test_a_time_skipping_worker_skips_a_dead_attempts_heartbeat_deadline_on_that_flow(store: Store) -> None:
    real = Real()
    w = _engine(store, real, skip=True, owner="w")  # `dex worker --until-idle --time-skip`
    w.start_flow(Single(Beat(None, every=5, finish_after=10)), "W", 0)
    _lease_elsewhere(store, w, "W", DEAD, real.t)  # its process crashed
    w.start_flow(Single(Beat(None, every=5, finish_after=10)), "done", 0)
    w.drive(["done"], until_idle=True)
    done_offset = store.get_flow("done").clock_offset  # type: ignore[union-attr]

    w.drive(None, until_idle=True)

    flow_w = store.get_flow("W")
    assert flow_w is not None and flow_w.status is FlowState.COMPLETED
    assert [(x.outcome, x.error_type) for x in store.attempts_of("W")] == [
        (AttemptOutcome.LOST, "Heartbeat"), (AttemptOutcome.COMPLETED, None)]
    assert flow_w.clock_offset >= 60 and real.t == VIRTUAL_EPOCH  # no real time waited
    assert store.get_flow("done").clock_offset == done_offset  # type: ignore[union-attr]


def test_an_engine_driving_a_flow_follows_a_skip_of_that_flow(store: Store) -> None:
    """`dex time skip 2m X` while `dex run X` (no --time-skip) waits: X's retry comes due."""
    real = Real()
    e = _engine(store, real, skip=False, owner="e")
    e.start_flow(Single(Beat(None, every=5, finish_after=10)), "X", 0)
    with store.tx() as tx:  # X backs off until 100 s from now on its clock
        tx.c.execute("UPDATE steps SET status = 'BACKOFF', attempt = 1, next_attempt_at = ? WHERE flow_id = 'X'",
                     (real.t + 100,))
    assert store.schedule(["X"], "e").due == real.t + 100
    store.skip_flows(["X"], 120)
    assert store.schedule(["X"], "e").due == real.t - 20
    assert e._fresh_now("X") == real.t + 120
