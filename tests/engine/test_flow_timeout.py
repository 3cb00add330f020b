"""The flow-timeout and id-reuse transitions (dexcli.engine.flow_timeout, transitions.flows' id reuse) against a
real SQLite file, without an engine: what `start` stores of its options, what `flow_timeout`
writes when a timeout is due (and that it fires once), and what a reused flow id keeps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from dexcli import Context, StepDecision, dead_end
from dexcli.engine import transitions as t
from dexcli.engine.deadlines import iso
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions import allows, fire_due, flow_timeout
from dexcli.sdk.errors import FlowAlreadyStartedError
from dexcli.sdk.registry import Registry
from dexcli.store import FlowState, StartSettings, StepState, Store
from tests.engine.test_transitions import T0, Orders, events, flow, request, steps


class Handled(Orders):
    def handle_timeout(self, context: Context) -> StepDecision:
        return dead_end()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "dex.db")
    yield s
    s.close()


@pytest.fixture
def defs() -> Definitions:
    return Definitions(Registry([Orders()]))


def started(store: Store, defs: Definitions, settings: StartSettings, flow_id: str = "f") -> None:
    with store.tx() as tx:
        t.start(tx, replace(request(defs, flow_id), settings=settings), T0)


def test_start_stores_the_timeout_and_its_time(store: Store, defs: Definitions) -> None:
    started(store, defs, StartSettings(timeout=60, timeout_policy="FAIL", id_reuse_policy="DEFAULT"))
    f = flow(store)
    assert (f.timeout, f.timeout_policy, f.timeout_at, f.start_delay) == (60, "FAIL", T0 + 60, None)
    assert store.schedule(None, "me").due == T0  # the start step is due first
    assert events(store)[0][1]["timeoutPolicy"] == "FAIL"


def test_a_start_delay_queues_the_start_step_at_its_end(store: Store, defs: Definitions) -> None:
    started(store, defs, StartSettings(start_delay=3600))
    (s,) = steps(store).values()
    assert (s.status, s.next_attempt_at, s.scheduled_at) == (StepState.QUEUED, T0 + 3600, T0 + 3600)
    assert store.schedule(None, "me").due == T0 + 3600


def test_the_timeout_is_in_the_schedule_and_fires_once_when_due(store: Store, defs: Definitions) -> None:
    started(store, defs, StartSettings(timeout=60, timeout_policy="FAIL", start_delay=3600))
    # the timeout counts from the end of the start delay, as on a Dex server
    assert flow(store).timeout_at == T0 + 3660
    assert store.schedule(None, "me").due == T0 + 3600  # the delayed start step comes first
    assert events(store)[0][1]["timeoutTime"] == iso(T0 + 3660)
    with store.tx() as tx:
        assert flow_timeout(tx, "f", T0 + 3659, defs) is None  # not due yet: nothing written
    with store.tx() as tx:
        fired = fire_due(tx, T0 + 3660, None, defs)
    assert [(x.policy, x.closed and x.closed.error_type) for x in fired] == [("FAIL", "FLOW_TIMEOUT")]
    f = flow(store)
    assert (f.status, f.error_message, f.timeout_at, f.close_time) == \
        (FlowState.FAILED, "Flow timed out after 60 seconds", None, T0 + 3660)
    assert [s.status for s in steps(store).values()] == [StepState.CANCELED]  # the start step, never leased
    assert [e for e, _ in events(store)] == ["FlowStarted", "FlowTimedOut", "FlowClosed"]
    with store.tx() as tx:
        assert fire_due(tx, T0 + 7200, None, defs) == []


def test_cancel_closes_canceled(store: Store, defs: Definitions) -> None:
    started(store, defs, StartSettings(timeout=60, timeout_policy="CANCEL"))
    with store.tx() as tx:
        fired = flow_timeout(tx, "f", T0 + 60, defs)
    assert fired is not None and fired.closed is not None
    assert (flow(store).status, flow(store).error_type) == (FlowState.CANCELED, None)


def test_handler_queues_the_timeout_handler_step_and_leaves_the_flow_running(store: Store) -> None:
    defs = Definitions(Registry([Handled()]))
    with store.tx() as tx:
        req = t.StartRequest(defs.get("Handled", None), request(Definitions(Registry([Orders()]))).start, "f",
                             None, None, False, StartSettings(timeout=60, timeout_policy="HANDLER"))
        t.start(tx, req, T0)
    with store.tx() as tx:
        fired = flow_timeout(tx, "f", T0 + 61, defs)
    assert fired is not None and fired.closed is None and fired.handler is not None
    h = steps(store)["sys:timeout_handler-1"]
    assert (h.status, h.next_attempt_at, h.from_step_execution_id, h.input) == \
        (StepState.QUEUED, T0 + 61, "__timeout__", "null")
    assert flow(store).is_running and flow(store).timeout_at is None
    assert defs.step_for("f", "Handled", None, "sys:timeout_handler") is not None


@pytest.mark.parametrize("policy,status,allowed", [
    ("DEFAULT", FlowState.FAILED, False), ("DISALLOW", FlowState.FAILED, False),
    ("ALLOW_IF_PREVIOUS_FAILED", FlowState.COMPLETED, False), ("ALLOW_IF_PREVIOUS_FAILED", FlowState.CANCELED, True),
    ("ALLOW_IF_PREVIOUS_FAILED", FlowState.TERMINATED, True), ("ALLOW_IF_NOT_RUNNING", FlowState.COMPLETED, True),
    ("ALLOW_IF_NOT_RUNNING", FlowState.RUNNING, False), ("ALLOW_TERMINATE_IF_RUNNING", FlowState.RUNNING, True),
])
def test_which_previous_runs_each_policy_replaces(store: Store, defs: Definitions, policy: str,
                                                  status: FlowState, allowed: bool) -> None:
    started(store, defs, StartSettings())
    assert allows(policy, replace(flow(store), status=status)) is allowed


def test_a_refused_reuse_writes_nothing(store: Store, defs: Definitions) -> None:
    started(store, defs, StartSettings())
    before = flow(store)
    with pytest.raises(FlowAlreadyStartedError), store.tx() as tx:
        t.start(tx, replace(request(defs, request_id="other"), settings=StartSettings(
            id_reuse_policy="ALLOW_IF_NOT_RUNNING")), T0 + 1)
    assert flow(store) == before and len(events(store)) == 1
