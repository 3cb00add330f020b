"""Client.time_travel in virtual time: every TimeTravelType, both step methods, the RPCs after the
point re-applied (or not, with skip_writes_reapply), running and closed flows, and the points
it refuses. OrderFlow: Prepare -> Review (waits for the `decide` RPC's publish, or 1 h) -> Ship."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    DexServiceError,
    FlowNotFoundError,
    TimeTravelOptions,
    TimeTravelStepMethod,
    TimeTravelType,
)
from dexcli.engine.doctor import check as doctor_check
from dexcli.sdk.errors import TimeTravelPointError
from dexcli.testing import DexTestEnv
from tests.engine.time_travel_flows import RUNS, After, Before, OrderFlow


def _decided(env: DexTestEnv, flow: OrderFlow, flow_id: str = "o") -> None:
    """Run the flow to its end: Review waits, the RPC decides "yes", Ship completes."""
    RUNS.clear()
    env.start(flow, 1, flow_id)
    env.drive([flow_id], until=lambda: _status(env, flow_id, "Review-1") == "WAITING")
    env.client.invoke_rpc(flow.decide, flow_id, "yes")
    assert env.client.wait_for_flow(flow_id).completions[0].output == {"n": 2, "verdict": "yes", "by": "rpc"}


def _status(env: DexTestEnv, flow_id: str, seid: str) -> str | None:
    return next((s["status"] for s in env.inspect(flow_id)["steps"] if s["stepExecutionId"] == seid), None)


def _attrs(env: DexTestEnv, flow_id: str) -> dict[str, Any]:
    return {k: json.loads(v) for k, _, _, v in env.store.read(lambda tx: tx.attribute_values(flow_id))}


def _event(env: DexTestEnv, flow_id: str, type_: str) -> dict[str, Any]:
    return next(e for e in env.inspect(flow_id)["history"] if e["type"] == type_)


def test_beginning_makes_a_new_run_and_keeps_the_old_one_intact() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)
        old = env.inspect("o")
        new_run = env.client.time_travel("o", TimeTravelOptions(TimeTravelType.BEGINNING, reason="code fix"))
        assert new_run != old["summary"]["runId"]
        assert env.client.describe_flow("o").run_id == new_run
        archived = env.inspect(f"o${old['summary']['runId']}")
        assert archived["summary"]["flowStatus"] == "COMPLETED"
        assert archived["history"] == old["history"] and archived["steps"] == old["steps"]
        fork = _event(env, "o", "TimeTravelFork")
        assert (fork["previousRunId"], fork["targetEventId"], fork["reason"]) == (old["summary"]["runId"], 1,
                                                                                  "code fix")
        assert [e["type"] for e in env.inspect("o")["history"]][:2] == ["FlowStarted", "TimeTravelFork"]
        # by default the RPC that came later is re-applied: its decision waits for Review again
        assert env.client.wait_for_flow("o").completions[0].output == {"n": 2, "verdict": "yes", "by": "rpc"}
        assert RUNS == {"Prepare.execute": 2, "Review.wait_for": 2, "Review.execute": 2, "Ship.execute": 2}
        assert doctor_check(env.store)[0] == []  # both runs
        runs = env.inspect("o")["runs"]
        assert [(r["runId"], r["via"], r["current"]) for r in runs] == [
            (old["summary"]["runId"], None, False), (new_run, "timeTravel", True)]
        assert runs[1]["previousRunId"] == old["summary"]["runId"]


def test_skip_writes_reapply_leaves_the_later_rpc_out() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)
        env.client.time_travel("o", TimeTravelOptions(TimeTravelType.BEGINNING, skip_writes_reapply=True))
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        assert _attrs(env, "o") == {"stage": "prepared"}  # the RPC's decided_by is not there
        assert env.store.read(lambda tx: tx.pending_messages("o")) == []
        # nothing decides: the timer does, an hour on (virtual time)
        assert env.client.wait_for_flow("o").completions[0].output == {"n": 2, "verdict": "expired", "by": None}


def test_step_type_resumes_at_its_latest_execution_with_the_state_of_then() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)
        assert _attrs(env, "o")["stage"] == "shipped"
        env.client.time_travel("o", TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Review"))
        snap = env.inspect("o")
        assert [(s["stepExecutionId"], s["status"]) for s in snap["steps"]] == [
            ("Prepare-1", "COMPLETED"), ("Review-1", "QUEUED")]
        assert _attrs(env, "o") == {"stage": "prepared", "decided_by": "rpc"}  # as then, plus the RPC re-applied
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "yes"
        assert RUNS == {"Prepare.execute": 1, "Review.wait_for": 2, "Review.execute": 2, "Ship.execute": 2}
        assert _attrs(env, "o")["stage"] == "shipped"


def test_step_execution_id_execute_keeps_the_wait_result_and_reruns_execute() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)
        env.client.time_travel("o", TimeTravelOptions(
            TimeTravelType.STEP_EXECUTION_ID, step_execution_id="Review-1", step_method=TimeTravelStepMethod.EXECUTE))
        step = env.inspect("o")["steps"][1]
        assert (step["stepExecutionId"], step["status"], step["method"]) == ("Review-1", "QUEUED", "EXECUTE")
        assert step["attempt"] == 0
        result = env.client.wait_for_flow("o")
        assert result.completions[0].output == {"n": 2, "verdict": "yes", "by": "rpc"}
        assert RUNS == {"Prepare.execute": 1, "Review.wait_for": 1, "Review.execute": 2, "Ship.execute": 2}
        # its attempts in the new run count from 1 for its handler, after the old run's on the row
        review = env.inspect("o")["steps"][1]
        assert [a["attempt"] for a in review["attempts"]] == [1]
        assert doctor_check(env.store)[0] == []  # both runs


def test_step_execution_id_wait_for_reruns_the_wait() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)
        env.client.time_travel("o", TimeTravelOptions(
            TimeTravelType.STEP_EXECUTION_ID, step_execution_id="Review-1",
            step_method=TimeTravelStepMethod.WAIT_FOR, skip_writes_reapply=True))
        assert env.inspect("o")["steps"][1]["method"] == "WAIT_FOR"
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        env.client.invoke_rpc(flow.decide, "o", "no")
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "no"
        assert RUNS["Review.wait_for"] == 2 and RUNS["Prepare.execute"] == 1


def test_history_event_time_resumes_before_the_first_event_at_or_after_it() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        RUNS.clear()
        env.start(flow, 1, "o")
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        env.clock.advance(600)  # the RPC comes ten minutes later
        env.client.invoke_rpc(flow.decide, "o", "yes")
        env.client.wait_for_flow("o")
        rpc_time = _event(env, "o", "RpcExecutionCompleted")["eventTime"]
        when = datetime.fromisoformat(rpc_time.replace("Z", "+00:00"))
        env.client.time_travel("o", TimeTravelOptions(TimeTravelType.HISTORY_EVENT_TIME, history_event_time=when,
                                                      skip_writes_reapply=True))
        fork = _event(env, "o", "TimeTravelFork")
        assert [e["type"] for e in env.inspect("o")["history"]][:fork["targetEventId"]] == [
            "FlowStarted", "StepExecuteCompleted"]
        assert fork["requeued"] == ["Review-1"]
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "expired"


def test_a_running_flow_is_terminated_and_its_new_run_driven_on() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        RUNS.clear()
        env.start(flow, 1, "o")
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        old_run = env.client.describe_flow("o").run_id
        new_run = env.client.time_travel("o", TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Prepare",
                                                                reason="retry"))
        archived = env.inspect(f"o${old_run}")["summary"]
        assert archived["flowStatus"] == "TERMINATED"
        assert archived["errorMessage"] == f"time travel: run {new_run} replaces it (retry)"
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        env.client.invoke_rpc(flow.decide, "o", "ok")
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "ok"
        assert RUNS["Prepare.execute"] == 2


def test_async_client_time_travel() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        _decided(env, flow)

        async def travel() -> str:
            client = AsyncClient(engine=env.engine)
            return await client.time_travel("o", TimeTravelOptions(TimeTravelType.BEGINNING))

        new_run = asyncio.run(travel())
        assert env.client.describe_flow("o").run_id == new_run
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "yes"


@pytest.mark.parametrize(("options", "message"), [
    (TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Nope"), "step type Nope never ran in run"),
    (TimeTravelOptions(TimeTravelType.STEP_EXECUTION_ID, step_execution_id="Review-7",
                       step_method=TimeTravelStepMethod.WAIT_FOR), "no step execution Review-7 in run"),
    (TimeTravelOptions(TimeTravelType.HISTORY_EVENT_TIME, history_event_time=datetime(2030, 1, 1, tzinfo=UTC)),
     "has no history event at or after 2030-01-01T00:00:00.000Z"),
])
def test_points_the_history_lacks_are_refused_and_nothing_changes(options: TimeTravelOptions, message: str) -> None:
    with DexTestEnv(start=0.0) as env:
        _decided(env, OrderFlow())
        before = env.inspect("o")
        with pytest.raises(TimeTravelPointError, match=message) as err:
            env.client.time_travel("o", options)
        assert isinstance(err.value, DexServiceError)
        assert env.inspect("o")["history"] == before["history"]
        assert len(env.inspect("o")["runs"]) == 1


def test_execute_of_a_step_whose_wait_never_completed_is_refused() -> None:
    with DexTestEnv(start=0.0) as env:
        env.start(OrderFlow(), 1, "o")
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        with pytest.raises(TimeTravelPointError, match="the wait_for of Review-1 never completed"):
            env.client.time_travel("o", TimeTravelOptions(TimeTravelType.STEP_EXECUTION_ID,
                                                          step_execution_id="Review-1",
                                                          step_method=TimeTravelStepMethod.EXECUTE))
        assert env.client.describe_flow("o").status.name == "RUNNING"


@pytest.mark.parametrize(("options", "message"), [
    (TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Review", step_method=TimeTravelStepMethod.EXECUTE),
     "step method is only valid for a Step execution ID"),
    (TimeTravelOptions(TimeTravelType.STEP_EXECUTION_ID, step_execution_id="Review-1"),
     "step method must be WaitFor or Execute"),
    (TimeTravelOptions(TimeTravelType.STEP_TYPE), "step type is required"),
    (TimeTravelOptions(TimeTravelType.HISTORY_EVENT_TIME), "history event time is required"),
])
def test_selectors_that_do_not_fit_the_type_are_a_value_error(options: TimeTravelOptions, message: str) -> None:
    with DexTestEnv(start=0.0) as env:
        _decided(env, OrderFlow())
        with pytest.raises(ValueError, match=message):
            env.client.time_travel("o", options)


def test_an_unknown_flow_is_not_found() -> None:
    with DexTestEnv(start=0.0) as env, pytest.raises(FlowNotFoundError):
        env.client.time_travel("nope", TimeTravelOptions(TimeTravelType.BEGINNING))


def test_a_reapplied_rpc_starts_its_steps_again_in_the_new_run() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        RUNS.clear()
        env.start(flow, 1, "o")
        env.drive(["o"], until=lambda: _status(env, "o", "Review-1") == "WAITING")
        env.client.invoke_rpc(flow.remind, "o", "call back")
        env.client.invoke_rpc(flow.decide, "o", "yes")
        env.client.wait_for_flow("o")
        assert RUNS["Note.execute"] == 1
        env.client.time_travel("o", TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Review"))
        again = [e for e in env.inspect("o")["history"] if e.get("reappliedFromEventId")]
        assert [(e["rpcName"], e["nextSteps"]) for e in again] == [("remind", ["Note-1"]), ("decide", [])]
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "yes"
        assert RUNS["Note.execute"] == 2 and RUNS["Prepare.execute"] == 1
        assert doctor_check(env.store)[0] == []


def test_a_message_published_before_the_point_and_not_yet_taken_is_pending_again() -> None:
    with DexTestEnv(start=0.0) as env:
        flow = OrderFlow()
        RUNS.clear()
        env.start(flow, 99, "o")  # Prepare publishes "auto"; Review takes it at once
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "auto"
        env.client.time_travel("o", TimeTravelOptions(
            TimeTravelType.STEP_EXECUTION_ID, step_execution_id="Review-1", step_method=TimeTravelStepMethod.WAIT_FOR))
        assert [(q, json.loads(v)) for q, _, v in env.store.read(lambda tx: tx.pending_messages("o"))] == [
            ("decisions", "auto")]
        assert env.client.wait_for_flow("o").completions[0].output["verdict"] == "auto"
        assert RUNS["Prepare.execute"] == 1 and RUNS["Review.wait_for"] == 2


def test_beginning_queues_the_start_step_the_code_has_now(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db, start=0.0) as env:
        env.start(Before(), 4, "r")
        env.drive(["r"], until=lambda: env.inspect("r")["steps"][0]["attempt"] >= 2)
    with DexTestEnv(db, start=100.0) as env:  # the code changed: its start step Old is New now
        env.engine.definitions.registry.add(After())
        with pytest.raises(TimeTravelPointError, match=r"step Old \(Old-1, open at that point\) is no longer in"):
            env.client.time_travel("r", TimeTravelOptions(TimeTravelType.STEP_TYPE, step_type="Old"))
        env.client.time_travel("r", TimeTravelOptions(TimeTravelType.BEGINNING))
        assert env.client.wait_for_flow("r").completions[0].output == 40
        assert [s["stepExecutionId"] for s in env.inspect("r")["steps"]] == ["New-1"]
        assert doctor_check(env.store)[0] == []


def test_a_run_id_that_is_not_the_current_one_is_refused_in_the_change_itself() -> None:
    """The Dex CLI's --run-id, checked in the change's own transaction (not only by the CLI
    before it, where a run that changes in between would slip through)."""
    from dexcli.engine import TimeTravelRequest
    from dexcli.engine.transitions.flows import RunNotCurrentError

    with DexTestEnv(start=0.0) as env:
        _decided(env, OrderFlow())
        before = env.inspect("o")
        current = env.client.describe_flow("o").run_id
        with pytest.raises(RunNotCurrentError, match="is not the current run of flow o") as err:
            env.engine.change(TimeTravelRequest("o", "BEGINNING", run_id="an-old-run"))
        assert err.value.exit_code == 4
        assert env.inspect("o")["history"] == before["history"] and len(env.inspect("o")["runs"]) == 1
        new_run = env.engine.change(TimeTravelRequest("o", "BEGINNING", run_id=current))
        assert env.client.describe_flow("o").run_id == new_run != current
