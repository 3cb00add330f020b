"""The SubFlow state changes against a real SQLite file: `report_to_parent` (run by every
close) writes a child's end into the wait of the parent step that still waits on that run,
once, and makes the step due; it leaves alone a flow with no parent, a parent that moved on,
and an older run of the child id. `start_children` links parent and child both ways."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dexcli.engine import transitions as t
from dexcli.engine.transitions.subflow_results import report_to_parent
from dexcli.store import StepState
from dexcli.testing import DexTestEnv
from tests.engine.test_subflows import SEEN, ParentFlow

CHILD = "SubFlow:p-Parent-1-0"


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()  # ParentFlow waits all_of, on default options


def _waiting(tmp_path: Path) -> DexTestEnv:
    env = DexTestEnv(tmp_path / "dex.db", start=1_000_000.0)
    env.start(ParentFlow(), ["hang"], flow_id="p")
    env.drive(["p"], until=lambda: env.store.steps_of("p")[0].status is StepState.WAITING)
    return env


def test_start_children_links_parent_and_child_both_ways(tmp_path: Path) -> None:
    with _waiting(tmp_path) as env:
        child = env.store.get_flow(CHILD)
        assert child is not None and (child.parent_flow_id, child.parent_step_execution_id) == ("p", "Parent-1")
        (cond,) = json.loads(env.store.steps_of("p")[0].wait or "{}")["conditions"]
        assert (cond["kind"], cond["flowId"], cond["runId"], cond["result"]) == ("subflow", CHILD, child.run_id, None)
        assert env.store.steps_of("p")[0].next_attempt_at is None  # no timer: nothing due
        assert env.store.read(lambda tx: [f.flow_id for f in tx.children_of("p")]) == [CHILD]


def test_a_childs_close_records_its_result_once_and_makes_the_parent_step_due(tmp_path: Path) -> None:
    with _waiting(tmp_path) as env:
        now = env.clock.now()
        with env.store.tx() as tx:
            t.stop(tx, CHILD, "TERMINATE", "enough", now)  # closes it: report_to_parent runs in that close
        step = env.store.steps_of("p")[0]
        assert step.status is StepState.WAITING and step.next_attempt_at == now
        (cond,) = json.loads(step.wait or "{}")["conditions"]
        assert cond["result"] == {"status": "TERMINATED", "completions": [], "errorType": None, "errorMessage": None}
        with env.store.tx() as tx:
            assert report_to_parent(tx, CHILD, now + 1) is None  # it has its result: once
            assert report_to_parent(tx, "p", now) is None  # running, and no parent
        events = [e for e in env.store.history_of("p") if e.type == "SubFlowCompleted"]
        assert len(events) == 1 and json.loads(events[0].payload)["flowStatus"] == "TERMINATED"
        assert env.client.wait_for_flow("p").single_output(list) == ["TERMINATED"]  # the next pass evaluates it


def test_an_older_run_of_the_child_id_or_a_parent_that_moved_on_is_left_alone(tmp_path: Path) -> None:
    with _waiting(tmp_path) as env:
        now = env.clock.now()
        with env.store.tx() as tx:
            step = tx.get_step("p", "Parent-1")
            assert step is not None and step.wait is not None
            wait = json.loads(step.wait)
            wait["conditions"][0]["runId"] = "another-run"
            tx.set_wait("p", "Parent-1", json.dumps(wait), None)
            t.stop(tx, CHILD, "CANCEL", None, now)
        assert json.loads(env.store.steps_of("p")[0].wait or "{}")["conditions"][0]["result"] is None
        with env.store.tx() as tx:
            t.stop(tx, "p", "CANCEL", None, now)  # the parent is closed: nothing to wake
            assert report_to_parent(tx, CHILD, now) is None
