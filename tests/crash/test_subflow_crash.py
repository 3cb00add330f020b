"""SubFlows across real processes that die: a `dex run` of the fan-out example killed
(os._exit, `--crash-at`) once its children have started, or SIGKILLed while they run, is
resumed by `dex resume` of the parent; parent and children finish, and each child was started
exactly once (the children start in the transaction that records the parent's wait)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from dexcli.store import FlowState, StepState, Store
from tests.crash.crashkit import dex, sigkill, spawn

CHILDREN = ("SubFlow:demo-Split-1-0", "SubFlow:demo-Split-1-1")
WAIT_SECONDS = 60


def _history_types(store: Store, flow_id: str) -> list[str]:
    return [e.type for e in store.history_of(flow_id)]


def _check_crashed_with_children_started(db: Path) -> None:
    store = Store(db)
    try:
        parent = store.get_flow("demo")
        assert parent is not None and parent.status is FlowState.RUNNING
        assert store.steps_of("demo")[0].status is StepState.WAITING
        for child in CHILDREN:
            flow = store.get_flow(child)
            assert flow is not None and flow.status is FlowState.RUNNING and flow.parent_flow_id == "demo"
        assert _history_types(store, "demo").count("SubFlowStarted") == 2
    finally:
        store.close()


def _resume_and_check(db: Path) -> None:
    res = dex(db, "resume", "demo", "--time-skip")
    assert res.returncode == 0, res.describe()
    store = Store(db)
    try:
        parent = store.get_flow("demo")
        assert parent is not None and parent.status is FlowState.COMPLETED, res.describe()
        assert json.loads(parent.completions)[0]["output"] == {
            "sumOfSquares": 5, "children": {CHILDREN[0]: "COMPLETED", CHILDREN[1]: "COMPLETED"}}
        for child in CHILDREN:
            flow = store.get_flow(child)
            assert flow is not None and flow.status is FlowState.COMPLETED
            assert _history_types(store, child).count("FlowStarted") == 1
        ids = [f.flow_id for f in store.list_flows(limit=100)]
        assert sorted(ids) == sorted(["demo", *CHILDREN])  # no second run of any child
        assert _history_types(store, "demo").count("SubFlowStarted") == 2
    finally:
        store.close()


def test_a_run_that_exits_once_its_children_started_resumes_and_both_finish(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    # the second attempt that starts is a child's (the first is the parent's wait_for)
    crashed = dex(db, "run", "fan-out", "--flow-id", "demo", "--input", "2", "--crash-at", "attempt-start:2")
    assert crashed.returncode != 0, crashed.describe()
    _check_crashed_with_children_started(db)
    _resume_and_check(db)


def test_a_run_killed_while_its_children_wait_resumes_and_both_finish(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    run = spawn(db, "run", "fan-out", "--flow-id", "demo", "--input", "2")
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            store = Store(db) if db.exists() else None
            try:
                waiting = store is not None and all(
                    store.get_flow(c) is not None and store.steps_of(c)
                    and store.steps_of(c)[0].status is StepState.WAITING for c in CHILDREN)
            finally:
                if store is not None:
                    store.close()
            if waiting:
                break
            assert run.poll() is None, "dex run ended before its children waited"
            time.sleep(0.05)
        else:
            raise AssertionError("the children did not reach their waits")
    finally:
        sigkill(run)
        run.communicate()
    assert run.returncode == -9
    _check_crashed_with_children_started(db)
    _resume_and_check(db)
