"""Rules 10-13: one transaction per decision, history, flow ids, statuses, stop_flow."""

import json
from datetime import timedelta

import pytest

from dexcli import (
    AsyncContext,
    Context,
    FlowAlreadyStartedError,
    FlowErrorType,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowStatus,
    LongPollTimeoutError,
    StartFlowOptions,
    Step,
    StepDecision,
    StepMovement,
    StepOptions,
    StopFlowOptions,
    StopType,
    go_to,
    go_to_many,
    graceful_complete,
)
from dexcli.store import Tx
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_flows import Beat, Flaky, Single, opts
from tests.engine.engine_helpers import at, attempts, history, history_types, rel, step, step_ids

# --- durability -----------------------------------------------------------------------


def test_decision_next_steps_and_history_commit_in_one_transaction(env, monkeypatch):
    """Make the history insert of the first decision fail inside the transaction: the step's
    completion and its next step must not be committed either."""
    raised = []
    original = Tx.add_event

    def failing_add_event(self, flow_id, now, type_, payload):
        if type_ == "StepExecuteCompleted" and not raised:
            raised.append(json.loads(payload)["stepExecutionId"])  # encoded once, by the transition
            raise RuntimeError("disk full (simulated) while writing history")
        return original(self, flow_id, now, type_, payload)

    monkeypatch.setattr(Tx, "add_event", failing_add_event)
    env.start(ThreeStepFlow(), 1, "f")
    env.drive(until=lambda: bool(raised))
    assert raised == ["First-1"]
    assert step_ids(env, "f") == ["First-1"]  # Second-1 was rolled back with the rest
    first = step(env, "f", "First-1")
    assert first["status"] == "RUNNING" and first["decision"] is None and first["endTime"] is None
    assert history_types(env, "f") == ["FlowStarted"]
    assert env.result("f").status is FlowStatus.RUNNING


def test_history_and_steps_agree(env):
    result = env.run(ThreeStepFlow(), 1, "f")
    assert result.single_output(int) == 7
    view = env.inspect("f")
    steps = {s["stepExecutionId"]: s for s in view["steps"]}
    completed = [e for e in view["history"] if e["type"] == "StepExecuteCompleted"]
    assert [e["stepExecutionId"] for e in completed] == ["First-1", "Second-1", "Third-1"]
    for e in completed:
        s = steps[e["stepExecutionId"]]
        assert s["status"] == "COMPLETED" and s["endTime"] == e["eventTime"]
        assert s["decision"] == e["decision"]
        for nxt in e["decision"].get("next", []):
            n = steps[nxt["stepExecutionId"]]
            assert n["fromStepExecutionId"] == e["stepExecutionId"]
            assert n["scheduledTime"] == e["eventTime"] and n["input"] == nxt["input"]
    assert [n["input"] for e in completed for n in e["decision"].get("next", [])] == [2, 4]


class HalfValid(Step[int]):
    """Attempt 1 returns a go_to_many whose second movement has an invalid input."""

    def execute(self, context: Context, input: int) -> StepDecision:
        bad = "not a number" if context.attempt == 1 else 2
        return go_to_many(StepMovement.of(Sink, 1), StepMovement.of(Sink, bad))


class Sink(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


def test_a_failed_attempt_applies_nothing(env):
    result = env.run(Single(HalfValid(), Sink()), 0, "f")
    tries = attempts(env, "f", "HalfValid-1")
    assert [a["outcome"] for a in tries] == ["FAILED", "COMPLETED"]
    assert tries[0]["errorType"] == "dexcli.sdk.errors.InvalidStepResultError"
    assert "Sink" in tries[0]["detail"]
    # only attempt 2's movements exist: no Sink-3/Sink-4, and Sink-1 came from attempt 2
    assert step_ids(env, "f") == ["HalfValid-1", "Sink-1", "Sink-2"]
    assert rel(env, step(env, "f", "Sink-1")["scheduledTime"]) == 1
    assert [c.output for c in result.completions] == [1, 2]


class Unencodable(Step[int]):
    def get_step_options(self) -> StepOptions:
        return opts(attempts=1)

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(object())


def test_an_output_that_cannot_be_encoded_fails_the_attempt(env):
    result = env.run(Single(Unencodable()), 0, "f")
    assert result.status is FlowStatus.FAILED and result.error_type is FlowErrorType.WORKER_API_FAILED
    assert result.completions == ()
    assert attempts(env, "f", "Unencodable-1")[0]["errorType"] == "dexcli.sdk.errors.ValueMappingError"


# --- history ----------------------------------------------------------------------------

class Start(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Flaky, input + 1)


def test_history_events_order_and_per_attempt_records(env):
    flaky = Flaky(None, fail_attempts=(1, 2))
    result = env.run(Single(Start(), flaky), 5, "f")
    assert result.single_output(int) == 3
    events = history(env, "f")
    assert [e["type"] for e in events] == ["FlowStarted", "StepExecuteCompleted", "StepExecuteCompleted",
                                           "FlowClosed"]  # failed attempts are not history events
    ids = [e["eventId"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    times = [at(e["eventTime"]) for e in events]
    assert times == sorted(times)
    started, c1, c2, closed = events
    assert (started["flowType"], started["startStepType"], started["input"]) == ("Single", "Start", 5)
    assert c1["decision"] == {"kind": "goTo", "next": [{"stepType": "Flaky", "stepExecutionId": "Flaky-1",
                                                         "input": 6}]}
    assert (c2["stepExecutionId"], c2["fromStepExecutionId"], c2["attempt"]) == ("Flaky-1", "Start-1", 3)
    assert c2["decision"] == {"kind": "gracefulComplete", "output": 3}
    assert rel(env, c2["eventTime"]) == 3  # retries after 1 s and 2 s
    assert (closed["flowStatus"], closed["results"]) == (
        "COMPLETED", [{"stepType": "Flaky", "stepExecutionId": "Flaky-1", "output": 3}])
    # our own per-attempt records show the retries that Dex's history hides
    tries = attempts(env, "f", "Flaky-1")
    assert [(a["attempt"], a["outcome"], a["errorType"], rel(env, a["startTime"]), rel(env, a["endTime"]))
            for a in tries] == [(1, "FAILED", "builtins.RuntimeError", 0, 0),
                                (2, "FAILED", "builtins.RuntimeError", 1, 1),
                                (3, "COMPLETED", None, 3, 3)]
    assert [a["detail"] for a in tries] == ["attempt 1 fails", "attempt 2 fails", None]


def test_a_terminal_failure_is_one_step_execute_failed_event(env):
    env.run(Single(Flaky(opts(attempts=3), fail_always=True)), 0, "f")
    events = history(env, "f")
    assert [e["type"] for e in events] == ["FlowStarted", "StepExecuteFailed", "FlowClosed"]
    failed = events[1]
    assert (failed["stepExecutionId"], failed["attempt"], failed["errorType"], failed["detail"]) == (
        "Flaky-1", 3, "builtins.RuntimeError", "attempt 3 fails")


# --- flow ids -------------------------------------------------------------------------

def test_starting_an_existing_flow_id_is_refused(env):
    flow = ThreeStepFlow()
    env.start(flow, 1, "dup")
    with pytest.raises(FlowAlreadyStartedError, match="dup"):
        env.client.start_flow(flow, "dup", 2)
    env.client.wait_for_flow("dup")
    with pytest.raises(FlowAlreadyStartedError):  # closed runs are not reused either (DEFAULT)
        env.client.start_flow(flow, "dup", 3)
    assert env.inspect("dup")["summary"]["input"] == 1
    assert len(history_types(env, "dup")) == 5


def test_ignore_already_started_with_the_same_request_id(env):
    flow = ThreeStepFlow()
    run_id = env.client.start_flow(flow, "r", 1, StartFlowOptions(request_id="req-1"))
    again = env.client.start_flow(flow, "r", 1, StartFlowOptions(request_id="req-1", ignore_already_started=True))
    assert again == run_id
    with pytest.raises(FlowAlreadyStartedError):
        env.client.start_flow(flow, "r", 1, StartFlowOptions(request_id="req-2", ignore_already_started=True))


def test_a_flow_id_is_generated_when_none_is_given(env):
    flow = ThreeStepFlow()
    run_a = env.client.start_flow(flow, None, 1)
    run_b = env.client.start_flow(flow, None, 1)
    flows = env.store.list_flows()
    ids = [f.flow_id for f in flows]
    assert len(set(ids)) == 2 and all(i.startswith("threestep-") for i in ids)
    assert {f.run_id for f in flows} == {run_a, run_b}


# --- statuses, stop_flow ---------------------------------------------------------------

def start_long(env, flow_id="f"):
    env.start(Single(Beat(None, every=5)), 0, flow_id)
    with pytest.raises(LongPollTimeoutError):
        env.client.wait_for_flow(flow_id, timeout=timedelta(seconds=12))
    assert env.result(flow_id).status is FlowStatus.RUNNING
    assert rel(env, env.inspect(flow_id)["now"]) == 12


@pytest.mark.parametrize("stop_type, status, error_type", [
    (StopType.CANCEL, FlowStatus.CANCELED, None),
    (StopType.TERMINATE, FlowStatus.TERMINATED, None),
    (StopType.FAIL, FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED),
])
def test_stop_flow(env, stop_type, status, error_type):
    start_long(env)
    env.client.stop_flow("f", StopFlowOptions(type=stop_type, reason="operator says stop"))
    result = env.result("f")
    assert (result.status, result.error_type) == (status, error_type)
    if stop_type is StopType.FAIL:
        assert result.error_message == "operator says stop"
    assert env.client.wait_for_flow("f") == result  # terminal: returns at once, does not raise
    s = step(env, "f", "Beat-1")
    assert s["status"] == "CANCELED" and rel(env, s["endTime"]) == 12
    closed = history(env, "f")[-1]
    assert (closed["type"], closed["flowStatus"], rel(env, closed["eventTime"])) == ("FlowClosed", status.name, 12)
    with pytest.raises(FlowNotActiveOrNotFoundError):
        env.client.stop_flow("f")


def test_stop_unknown_flow_and_describe(env):
    with pytest.raises(FlowNotActiveOrNotFoundError):
        env.client.stop_flow("nope")
    with pytest.raises(FlowNotFoundError):
        env.client.describe_flow("nope")
    env.run(ThreeStepFlow(), 1, "f")
    info = env.client.describe_flow("f")
    assert (info.flow_id, info.flow_type, info.status) == ("f", "ThreeStepFlow", FlowStatus.COMPLETED)
    assert info.started_at.timestamp() == env.t0


def test_status_values_and_terminality():
    # the official SDK's values (lower-case); the store, the CLI and the JSON show the upper-case names
    assert [s.name for s in FlowStatus if s.is_terminal] == [
        "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "SERVER_SIDE_TIMEOUT_INTERNAL_ONLY"]
    assert FlowStatus("completed") is FlowStatus.COMPLETED and FlowStatus.COMPLETED.value == "completed"
    assert not FlowStatus.RUNNING.is_terminal
    assert {e.value for e in FlowErrorType} >= {"step_decision_failed", "client_api_failed", "worker_api_failed",
                                                "invalid_user_flow_code"}


def test_each_transition_is_one_commit_that_also_leases_the_next_step(env):
    """A claim leases First-1; after that every completion commits the decision, the history
    and the next step's first attempt together: no separate claim per step."""
    env.start(ThreeStepFlow(), 1, "f")
    before = env.store.commits
    env.drive()
    assert env.result("f").single_output(int) == 7
    assert env.store.commits - before == 4  # claim First-1, complete First-1, Second-1, Third-1
    for prev, nxt in (("First-1", "Second-1"), ("Second-1", "Third-1")):
        (a,) = attempts(env, "f", nxt)
        assert a["startTime"] == step(env, "f", prev)["endTime"] and a["outcome"] == "COMPLETED"


def test_async_client_starts_made_together_share_one_commit(env):
    import asyncio

    from dexcli import AsyncClient
    from dexcli.engine.clock import run as run_on_clock

    client = AsyncClient(engine=env.engine)
    flow = ThreeStepFlow()
    before = env.store.commits

    async def go():
        started = await asyncio.gather(*(client.start_flow(flow, f"f{i}", i) for i in range(5)),
                                       client.start_flow(flow, "f0", 9), return_exceptions=True)
        return started, await client.describe_flow("f3")

    started, info = run_on_clock(go, env.clock)
    assert env.store.commits - before == 1  # six starts, one transaction
    assert all(isinstance(r, str) for r in started[:5]) and len(set(started[:5])) == 5
    assert isinstance(started[5], FlowAlreadyStartedError)  # only that start is refused
    assert info.run_id == started[3] and info.status is FlowStatus.RUNNING
    env.drive()
    assert [env.result(f"f{i}").single_output(int) for i in range(5)] == [2 * (i + 1) + 3 for i in range(5)]


class AsyncHop(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return go_to(AsyncEnd, input)


class AsyncEnd(Step[int]):
    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        return graceful_complete(input)


def test_a_failing_outcome_in_a_group_commit_leaves_the_others_committed(env, monkeypatch):
    """Three flows' first steps finish in one loop pass and share a transaction; the history
    insert of the middle one fails. It alone is not applied; the others commit and go on."""
    original = Tx.add_event
    failed = []

    def failing_add_event(self, flow_id, now, type_, payload):
        if flow_id == "b" and type_ == "StepExecuteCompleted":
            failed.append(json.loads(payload)["stepExecutionId"])
            raise RuntimeError("disk full (simulated)")
        return original(self, flow_id, now, type_, payload)

    monkeypatch.setattr(Tx, "add_event", failing_add_event)
    flow = Single(AsyncHop(), AsyncEnd())
    for fid in ("a", "b", "c"):
        env.start(flow, 1, fid)
    commits = env.store.commits
    env.drive(until=lambda: env.result("a").is_terminal and env.result("c").is_terminal)
    assert failed == ["AsyncHop-1"]
    for fid in ("a", "c"):
        assert env.result(fid).single_output(int) == 1
    assert step_ids(env, "b") == ["AsyncHop-1"] and step(env, "b", "AsyncHop-1")["status"] == "RUNNING"
    assert history_types(env, "b") == ["FlowStarted"]
    # claim, the shared try that rolled back, its retry without b, then the second steps
    assert env.store.commits - commits <= 4
