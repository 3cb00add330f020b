"""Each transition (dexcli.engine.transitions) against a real SQLite file: what it writes in the
caller's transaction, what it returns, and what it refuses. No engine, no clock, no handlers
run: the tests build the facts a transition is given (a leased step, a checked decision, a
failure) and call it inside `store.tx()`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    Attribute,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    dead_end,
)
from dexcli.engine import transitions as t
from dexcli.engine.deadlines import iso
from dexcli.engine.definitions import Definitions
from dexcli.sdk.decisions import DecisionKind
from dexcli.sdk.errors import FlowAlreadyStartedError, FlowNotActiveOrNotFoundError
from dexcli.sdk.options import ResolvedOptions
from dexcli.sdk.registry import FlowDefinition, Registry
from dexcli.store import AttemptOutcome, FlowRecord, FlowState, StepRecord, StepState, Store

T0 = 1_000.0
PROGRESS = Stream("Progress", str, 400)
COUNTER = Attribute("counter", int)


def secs(n: float) -> timedelta:
    return timedelta(seconds=n)


class Start(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Work(Step[int]):
    """Retries: 2 s, then x3, capped at 10 s; four attempts; then the Recover step."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            heartbeat_timeout=secs(30), execute_method_timeout=secs(300),
            execute_retry=RetryPolicy(initial_interval=secs(2), backoff_coefficient=3.0,
                                      maximum_interval=secs(10), maximum_attempts=4),
        ).on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Recover(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Once(Step[int]):
    """One attempt, no route."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))

    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Short(Step[int]):
    """Unlimited attempts within a TotalDuration of 5 s (backoff 1 s, x2)."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(total_duration=secs(5)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Locked(Step[int]):
    """Holds the counter's lock; unlimited attempts within a TotalDuration of 5 s (backoff 1 s, x2)."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(COUNTER.lock(),), execute_retry=RetryPolicy(total_duration=secs(5)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return dead_end()


class Orders(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Start()).other_steps(Work(), Recover(), Once(), Short(), Locked())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(PROGRESS, COUNTER)


# ---------------------------------------------------------------------------- fixtures -----
@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "dex.db")
    yield s
    s.close()


@pytest.fixture
def defs() -> Definitions:
    return Definitions(Registry([Orders()]))


def definition(defs: Definitions) -> FlowDefinition:
    return defs.get("Orders", None)


def nxt(defs: Definitions, step_type: str, value: Any = 5) -> t.NextStep:
    d = definition(defs)
    spec = d.steps[step_type]
    return t.NextStep(spec, json.dumps(value), defs.options(d, spec))


def request(defs: Definitions, flow_id: str = "f", *, request_id: str | None = "req-1",
            ignore: bool = False, value: Any = 5) -> t.StartRequest:
    return t.StartRequest(definition(defs), nxt(defs, "Start", value), flow_id, "name:orders", request_id, ignore)


def decision(kind: DecisionKind, *next_steps: t.NextStep, output: Any = None, has_output: bool = False,
             reason: str | None = None) -> t.Decision:
    return t.Decision(kind, tuple(next_steps), output, has_output, reason)


def key(leased: t.Leased, owner: str = "me") -> t.AttemptKey:
    s = leased.step
    return t.AttemptKey(s.flow_id, s.step_execution_id, s.attempt, owner)


def started_by(store: Store, defs: Definitions, owner: str = "me", flow_id: str = "f") -> t.Leased:
    """Flow `flow_id` started at T0, its Start-1 attempt 1 leased to `owner`."""
    with store.tx() as tx:
        leased = t.start(tx, request(defs, flow_id), T0, owner).leased
    assert leased is not None
    return leased


def moved_to(store: Store, defs: Definitions, *step_types: str, at: float = T0 + 1,
             owner: str = "me") -> tuple[t.Leased, ...]:
    """Start-1 completed at `at` with a move to `step_types`, each leased to `owner`."""
    first = started_by(store, defs, owner)
    with store.tx() as tx:
        done = t.complete(tx, key(first, owner), first.step, T0, decision(
            DecisionKind.NEXT, *(nxt(defs, s) for s in step_types)), first.definition, at, lease_next=True)
    return done.leased


def flow(store: Store, flow_id: str = "f") -> FlowRecord:
    record = store.get_flow(flow_id)
    assert record is not None
    return record


def steps(store: Store, flow_id: str = "f") -> dict[str, StepRecord]:
    return {s.step_execution_id: s for s in store.steps_of(flow_id)}


def events(store: Store, flow_id: str = "f") -> list[tuple[str, dict[str, Any]]]:
    return [(e.type, json.loads(e.payload)) for e in store.history_of(flow_id)]


def outcomes(store: Store, flow_id: str = "f") -> dict[tuple[str, int], AttemptOutcome]:
    return {(a.step_execution_id, a.attempt): a.outcome for a in store.attempts_of(flow_id)}


def boom(at: float, **kw: Any) -> t.Failure:
    return t.Failure("builtins.RuntimeError", "boom", at, **kw)


# ---------------------------------------------------------------------------- start --------
def test_start_creates_the_flow_and_queues_its_start_step(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        started = t.start(tx, request(defs), T0)
    assert started.created and started.leased is None
    f = flow(store)
    assert (f.run_id, f.flow_type, f.flow_ref, f.status, f.input, f.request_id, f.start_time) == (
        started.run_id, "Orders", "name:orders", FlowState.RUNNING, "5", "req-1", T0)
    (s,) = store.steps_of("f")
    assert (s.step_execution_id, s.step_type, s.seq, s.from_step_execution_id, s.input) == (
        "Start-1", "Start", 1, t.START_SOURCE, "5")
    assert (s.status, s.attempt, s.next_attempt_at, s.lease_owner) == (StepState.QUEUED, 0, T0, None)
    assert (s.scheduled_at, s.total_deadline) == (T0, T0 + 4 * 3600)
    assert s.options == nxt(defs, "Start").options.to_json()
    assert store.attempts_of("f") == []
    assert events(store) == [("FlowStarted", {"flowType": "Orders", "runId": started.run_id,
                                              "startStepType": "Start", "startStepExecutionId": "Start-1",
                                              "input": 5})]


def test_start_without_a_request_id_records_a_generated_one(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        t.start(tx, request(defs, "a", request_id=None), T0)
        t.start(tx, request(defs, "b", request_id=None), T0)
    assert flow(store, "a").request_id and flow(store, "b").request_id
    assert flow(store, "a").request_id != flow(store, "b").request_id


def test_start_with_an_owner_leases_the_first_attempt(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        started = t.start(tx, request(defs), T0, owner="me")
    assert started.leased is not None
    (s,) = store.steps_of("f")
    assert started.leased.step == s
    assert (started.leased.run_id, started.leased.spec.step_type) == (started.run_id, "Start")
    assert (s.status, s.attempt, s.lease_owner, s.first_attempt_at, s.attempt_started_at) == (
        StepState.RUNNING, 1, "me", T0, T0)
    assert (s.heartbeat_deadline, s.attempt_deadline, s.next_attempt_at) == (T0 + 60, T0 + 7200, None)
    assert outcomes(store) == {("Start-1", 1): AttemptOutcome.RUNNING}


def test_start_refuses_a_taken_flow_id_before_writing_anything(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        first = t.start(tx, request(defs), T0)
    # refused inside a transaction that then commits: nothing was written
    with store.tx() as tx, pytest.raises(FlowAlreadyStartedError, match="flow f already exists"):
        t.start(tx, request(defs, request_id="req-2", value=9), T0 + 5, owner="me")
    assert flow(store).run_id == first.run_id and flow(store).input == "5"
    assert list(steps(store)) == ["Start-1"] and steps(store)["Start-1"].status is StepState.QUEUED
    assert [e for e, _ in events(store)] == ["FlowStarted"]


def test_start_answers_the_same_request_with_the_existing_run(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        first = t.start(tx, request(defs), T0)
    with store.tx() as tx:
        again = t.start(tx, request(defs, ignore=True), T0 + 5, owner="me")
    assert again == t.Started(first.run_id, False)
    assert list(steps(store)) == ["Start-1"] and store.attempts_of("f") == []
    assert [e for e, _ in events(store)] == ["FlowStarted"]


@pytest.mark.parametrize("request_id,ignore", [("req-2", True), ("req-1", False), (None, True)],
                         ids=["other-request", "not-ignored", "no-request-id"])
def test_start_refuses_a_taken_id_for_another_or_unnamed_request(store: Store, defs: Definitions,
                                                                 request_id: str | None, ignore: bool) -> None:
    with store.tx() as tx:
        t.start(tx, request(defs), T0)
    with store.tx() as tx, pytest.raises(FlowAlreadyStartedError):
        t.start(tx, request(defs, request_id=request_id, ignore=ignore), T0 + 5)


# ---------------------------------------------------------------------------- lease --------
def _runnable(store: Store, now: float) -> list[Any]:
    return store.read(lambda tx: tx.runnable_steps(now, None, 10))


def test_lease_starts_the_next_attempt_for_the_owner(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        started = t.start(tx, request(defs), T0)
    (r,) = _runnable(store, T0 + 2)
    d = definition(defs)
    with store.tx() as tx:
        leased = t.lease(tx, r, d, d.steps["Start"], "me", T0 + 2)
    assert leased is not None and leased.run_id == started.run_id and leased.definition is d
    assert leased.step == steps(store)["Start-1"]
    s = leased.step
    assert (s.status, s.attempt, s.lease_owner, s.first_attempt_at, s.attempt_started_at) == (
        StepState.RUNNING, 1, "me", T0 + 2, T0 + 2)
    assert (s.heartbeat_deadline, s.attempt_deadline, s.next_attempt_at) == (T0 + 62, T0 + 7202, None)
    assert leased.options == nxt(defs, "Start").options
    assert outcomes(store) == {("Start-1", 1): AttemptOutcome.RUNNING}


def test_lease_of_a_step_someone_else_leased_first_is_none(store: Store, defs: Definitions) -> None:
    with store.tx() as tx:
        t.start(tx, request(defs), T0)
    (r,) = _runnable(store, T0)
    d = definition(defs)
    with store.tx() as tx:
        assert t.lease(tx, r, d, d.steps["Start"], "other", T0) is not None
    with store.tx() as tx:
        assert t.lease(tx, r, d, d.steps["Start"], "me", T0 + 1) is None
    assert steps(store)["Start-1"].lease_owner == "other"
    assert [a.owner for a in store.attempts_of("f")] == ["other"]


def test_lease_after_a_backoff_keeps_the_first_attempt_time(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    with store.tx() as tx:
        t.fail(tx, work.step, "me", boom(T0 + 3), defs, T0 + 3)
    (r,) = _runnable(store, T0 + 5)
    d = definition(defs)
    with store.tx() as tx:
        leased = t.lease(tx, r, d, d.steps["Work"], "me", T0 + 5)
    assert leased is not None
    assert (leased.step.attempt, leased.step.first_attempt_at, leased.step.attempt_started_at) == (2, T0 + 1, T0 + 5)
    assert (leased.step.heartbeat_deadline, leased.step.attempt_deadline) == (T0 + 35, T0 + 305)
    assert leased.step == steps(store)["Work-1"]


def test_a_locked_method_counts_its_total_duration_from_the_lock_and_holds_it_through_its_backoff(
        store: Store, defs: Definitions) -> None:
    """Locked waits for an RPC's lock until T0 + 50: its 5 s budget starts at its lease (T0 + 60),
    and its lock stays held while it backs off; once the budget is spent it is released."""
    started_by(store, defs)
    with store.tx() as tx:
        assert tx.try_locks("f", ("counter",), "rpc:bump:1", T0, expires=T0 + 50) is None
    first = store.read(lambda tx: tx.get_step("f", "Start-1"))
    assert first is not None
    with store.tx() as tx:
        done = t.complete(tx, t.AttemptKey("f", "Start-1", 1, "me"), first, T0, decision(
            DecisionKind.NEXT, nxt(defs, "Locked")), definition(defs), T0 + 1, lease_next=True)
    assert done.leased == ()  # queued behind the RPC's lock
    d = definition(defs)
    (r,) = _runnable(store, T0 + 60)
    with store.tx() as tx:
        leased = t.lease(tx, r, d, d.steps["Locked"], "me", T0 + 60)
    assert leased is not None and leased.step.total_deadline == T0 + 65 == steps(store)["Locked-1"].total_deadline

    with store.tx() as tx:
        failed = t.fail(tx, leased.step, "me", boom(T0 + 61), defs, T0 + 61)
    assert failed.retry and failed.next_attempt_at == T0 + 62
    with store.tx() as tx:
        assert tx.lock_holder("f", "counter", T0 + 61.5) == "Locked-1"  # backing off, still held
        assert tx.try_locks("f", ("counter",), "rpc:bump:2", T0 + 61.5, expires=T0 + 70) == ("counter", "Locked-1")
    (r,) = _runnable(store, T0 + 62)
    with store.tx() as tx:
        again = t.lease(tx, r, d, d.steps["Locked"], "me", T0 + 62)
    assert again is not None and again.step.total_deadline == T0 + 65  # a retry does not restart it
    with store.tx() as tx:
        failed = t.fail(tx, again.step, "me", boom(T0 + 64), defs, T0 + 64)
    assert not failed.retry and failed.reason == "TotalDuration spent"
    assert store.read(lambda tx: tx.lock_holder("f", "counter", T0 + 64)) is None


# ---------------------------------------------------------------------------- heartbeat ----
def test_heartbeat_records_checkpoint_and_stream_messages(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    out = t.Outputs(last_time=T0 + 4, checkpoint=(True, '"page 2"'), heartbeats=2,
                    streams=[(PROGRESS, '"a"', T0 + 2, 100), (PROGRESS, '"b"', T0 + 3, 120)])
    with store.tx() as tx:
        tokens = t.heartbeat(tx, key(work), "Orders", 30.0, out)
    assert tokens is not None and len(tokens) == 2 and tokens[0] is not None and tokens[1] is not None
    assert tokens[0] < tokens[1]
    msgs = store.stream_messages("f")
    assert [(m.id, m.stream, m.source, m.value, m.created_time, m.size, m.flow_type) for m in msgs] == [
        (tokens[0], "Progress", "#Work-1", '"a"', T0 + 2, 100, "Orders"),
        (tokens[1], "Progress", "#Work-1", '"b"', T0 + 3, 120, "Orders")]
    s = steps(store)["Work-1"]
    assert (s.last_heartbeat_time, s.heartbeat_deadline) == (T0 + 4, T0 + 34)
    assert (s.has_heartbeat_value, s.heartbeat_value, s.status) == (True, '"page 2"', StepState.RUNNING)
    (a,) = [a for a in store.attempts_of("f") if a.step_execution_id == "Work-1"]
    assert (a.heartbeats, a.stream_writes, a.last_heartbeat) == (2, 2, T0 + 4)


def test_heartbeat_drops_a_message_that_can_never_fit(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    out = t.Outputs(last_time=T0 + 4, streams=[(PROGRESS, '"x"', T0 + 2, 401), (PROGRESS, '"y"', T0 + 3, 50)])
    with store.tx() as tx:
        tokens = t.heartbeat(tx, key(work), "Orders", 30.0, out)
    assert tokens is not None and tokens[0] is None and tokens[1] is not None
    assert [m.value for m in store.stream_messages("f")] == ['"y"']


@pytest.mark.parametrize("who", ["other-owner", "older-attempt", "flow-closed"])
def test_heartbeat_of_an_attempt_that_lost_its_step_writes_nothing(store: Store, defs: Definitions,
                                                                    who: str) -> None:
    (work,) = moved_to(store, defs, "Work")
    k = key(work)
    if who == "other-owner":
        k = t.AttemptKey(k.flow_id, k.seid, k.attempt, "stale")
    elif who == "older-attempt":
        with store.tx() as tx:  # attempt 1 failed, attempt 2 leased to someone else
            t.fail(tx, work.step, "me", boom(T0 + 2), defs, T0 + 2)
            (r,) = tx.runnable_steps(T0 + 4, None, 10)
            t.lease(tx, r, work.definition, work.spec, "other", T0 + 4)
    else:
        with store.tx() as tx:
            t.stop(tx, "f", "CANCEL", None, T0 + 2)
    before = (steps(store), store.attempts_of("f"))
    out = t.Outputs(last_time=T0 + 5, checkpoint=(True, "1"), heartbeats=1,
                    streams=[(PROGRESS, '"late"', T0 + 5, 50)])
    with store.tx() as tx:
        assert t.heartbeat(tx, k, "Orders", 30.0, out) is None
    assert (steps(store), store.attempts_of("f")) == before
    assert store.stream_messages("f") == []


# ---------------------------------------------------------------------------- complete -----
def test_complete_writes_the_next_step_and_the_event(store: Store, defs: Definitions) -> None:
    first = started_by(store, defs)
    with store.tx() as tx:
        done = t.complete(tx, key(first), first.step, T0, decision(DecisionKind.NEXT, nxt(defs, "Work", 7)),
                          first.definition, T0 + 1.5, lease_next=False)
    summary = {"kind": "goTo", "next": [{"stepType": "Work", "stepExecutionId": "Work-1", "input": 7}]}
    assert (done.summary, done.closed, done.leased, done.created) == (summary, None, (), 1)
    s = steps(store)
    assert (s["Start-1"].status, s["Start-1"].end_time, json.loads(s["Start-1"].decision or "")) == (
        StepState.COMPLETED, T0 + 1.5, summary)
    w = s["Work-1"]
    assert (w.status, w.attempt, w.seq, w.from_step_execution_id, w.input, w.scheduled_at, w.next_attempt_at) == (
        StepState.QUEUED, 0, 2, "Start-1", "7", T0 + 1.5, T0 + 1.5)
    assert w.total_deadline == T0 + 1.5 + 4 * 3600
    assert w.options == nxt(defs, "Work").options.to_json()
    assert outcomes(store) == {("Start-1", 1): AttemptOutcome.COMPLETED}
    assert store.attempts_of("f")[0].end_time == T0 + 1.5
    assert events(store)[-1] == ("StepExecuteCompleted", {
        "stepExecutionId": "Start-1", "fromStepExecutionId": t.START_SOURCE, "stepType": "Start", "attempt": 1,
        "startedTime": iso(T0), "duration": 1.5, "decision": summary})
    assert flow(store).is_running


def test_complete_numbers_step_executions_per_type(store: Store, defs: Definitions) -> None:
    work1, work2, rec1 = moved_to(store, defs, "Work", "Work", "Recover")
    assert [w.step.step_execution_id for w in (work1, work2, rec1)] == ["Work-1", "Work-2", "Recover-1"]
    with store.tx() as tx:
        done = t.complete(tx, key(work2), work2.step, T0 + 1, decision(
            DecisionKind.NEXT, nxt(defs, "Recover"), nxt(defs, "Work")), work2.definition, T0 + 2, lease_next=False)
    assert [n["stepExecutionId"] for n in done.summary["next"]] == ["Recover-2", "Work-3"]
    assert [(s.step_execution_id, s.seq) for s in store.steps_of("f")] == [
        ("Start-1", 1), ("Work-1", 2), ("Work-2", 3), ("Recover-1", 4), ("Recover-2", 5), ("Work-3", 6)]
    assert steps(store)["Work-3"].from_step_execution_id == "Work-2"


def test_complete_with_lease_next_leases_the_new_steps_to_the_owner(store: Store, defs: Definitions) -> None:
    work, rec = moved_to(store, defs, "Work", "Recover", at=T0 + 2)
    s = steps(store)
    assert work.step == s["Work-1"] and rec.step == s["Recover-1"]
    assert (work.step.status, work.step.attempt, work.step.lease_owner) == (StepState.RUNNING, 1, "me")
    assert (work.step.heartbeat_deadline, work.step.attempt_deadline) == (T0 + 32, T0 + 302)
    assert work.spec.step_type == "Work" and work.options == nxt(defs, "Work").options
    assert outcomes(store)[("Work-1", 1)] is AttemptOutcome.RUNNING
    assert outcomes(store)[("Recover-1", 1)] is AttemptOutcome.RUNNING


def test_force_complete_collects_the_output_and_closes_the_flow(store: Store, defs: Definitions) -> None:
    work, rec = moved_to(store, defs, "Work", "Recover")
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(
            DecisionKind.FORCE_COMPLETE, output={"total": 5}, has_output=True), work.definition, T0 + 3, True)
    assert done.closed == t.Closed(FlowState.COMPLETED) and done.leased == ()
    assert done.summary == {"kind": "forceComplete", "output": {"total": 5}}
    results = [{"stepType": "Work", "stepExecutionId": "Work-1", "output": {"total": 5}}]
    f = flow(store)
    assert (f.status, f.close_time, json.loads(f.completions)) == (FlowState.COMPLETED, T0 + 3, results)
    assert steps(store)["Recover-1"].status is StepState.CANCELED
    assert outcomes(store)[("Recover-1", 1)] is AttemptOutcome.CANCELED
    assert steps(store)["Work-1"].status is StepState.COMPLETED
    assert events(store)[-1] == ("FlowClosed", {"flowStatus": "COMPLETED", "errorType": None,
                                                "errorMessage": None, "results": results})


def test_decisions_and_events_are_stored_as_the_transition_summarised_them(store: Store,
                                                                           defs: Definitions) -> None:
    """The decision JSON is built once (inputs spliced as already encoded): the step row, the
    history event and the flow's collected outputs read back equal, keys in order."""
    value = {"b": 1, "a": [1, {"z": None, "y": "\u00e9 \"q\""}]}
    with store.tx() as tx:
        started = t.start(tx, request(defs, value=value), T0, "me")
    assert started.leased is not None
    payload = events(store)[0][1]
    assert list(payload) == ["flowType", "runId", "startStepType", "startStepExecutionId", "input"]
    assert json.dumps(payload["input"]) == json.dumps(value)
    first = started.leased
    with store.tx() as tx:
        done = t.complete(tx, key(first), first.step, T0, decision(DecisionKind.NEXT, nxt(defs, "Work", value),
                          nxt(defs, "Recover", [3])), first.definition, T0 + 1, lease_next=True)
    work, rec = done.leased
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(
            DecisionKind.GRACEFUL_COMPLETE, nxt(defs, "Once", value), output={"n": 1, "m": [2]}, has_output=True,
            reason="why"), work.definition, T0 + 2, lease_next=False, extra={"recordEvents": [{"k": 1}]})
    assert list(done.summary) == ["kind", "next", "output", "reason"]
    assert done.summary["next"] == [{"stepType": "Once", "stepExecutionId": "Once-1", "input": value}]
    assert json.dumps(json.loads(steps(store)["Work-1"].decision or "")) == json.dumps(done.summary)
    kind, payload = events(store)[-1]
    assert kind == "StepExecuteCompleted" and list(payload) == [
        "stepExecutionId", "fromStepExecutionId", "stepType", "attempt", "startedTime", "duration", "decision",
        "recordEvents"]
    assert json.dumps(payload["decision"]) == json.dumps(done.summary) and payload["recordEvents"] == [{"k": 1}]
    with store.tx() as tx:
        t.complete(tx, key(rec), rec.step, T0 + 1, decision(DecisionKind.FORCE_COMPLETE, output=2, has_output=True),
                   rec.definition, T0 + 3, lease_next=False)
    results = [{"stepType": "Work", "stepExecutionId": "Work-1", "output": {"n": 1, "m": [2]}},
               {"stepType": "Recover", "stepExecutionId": "Recover-1", "output": 2}]
    assert json.dumps(json.loads(flow(store).completions)) == json.dumps(results)
    assert events(store)[-1][1]["results"] == results


def test_graceful_complete_closes_an_idle_flow(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(
            DecisionKind.GRACEFUL_COMPLETE, output=3, has_output=True), work.definition, T0 + 3, True)
    assert done.closed == t.Closed(FlowState.COMPLETED)
    assert (flow(store).status, json.loads(flow(store).completions)) == (
        FlowState.COMPLETED, [{"stepType": "Work", "stepExecutionId": "Work-1", "output": 3}])
    assert [e for e, _ in events(store)][-2:] == ["StepExecuteCompleted", "FlowClosed"]


def test_graceful_complete_waits_for_the_open_steps_then_closes(store: Store, defs: Definitions) -> None:
    work, rec = moved_to(store, defs, "Work", "Recover")
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(
            DecisionKind.GRACEFUL_COMPLETE, output="w", has_output=True), work.definition, T0 + 3, True)
    assert done.closed is None
    f = flow(store)
    assert (f.status, f.graceful, json.loads(f.completions)) == (
        FlowState.RUNNING, True, [{"stepType": "Work", "stepExecutionId": "Work-1", "output": "w"}])
    with store.tx() as tx:
        last = t.complete(tx, key(rec), rec.step, T0 + 1, decision(DecisionKind.DEAD_END), rec.definition,
                          T0 + 4, True)
    assert last.closed == t.Closed(FlowState.COMPLETED)
    assert flow(store).status is FlowState.COMPLETED and flow(store).close_time == T0 + 4
    assert events(store)[-1][1]["results"] == [{"stepType": "Work", "stepExecutionId": "Work-1", "output": "w"}]


def test_a_dead_end_with_other_steps_open_leaves_the_flow_running(store: Store, defs: Definitions) -> None:
    work, rec = moved_to(store, defs, "Work", "Recover")
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(DecisionKind.DEAD_END), work.definition,
                          T0 + 3, True)
    assert done.closed is None and flow(store).is_running and not flow(store).graceful


def test_force_fail_fails_the_flow_with_the_reason(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    with store.tx() as tx:
        done = t.complete(tx, key(work), work.step, T0 + 1, decision(
            DecisionKind.FORCE_FAIL, reason="no stock"), work.definition, T0 + 3, True)
    assert done.closed == t.Closed(FlowState.FAILED, "STEP_DECISION_FAILED", "no stock")
    f = flow(store)
    assert (f.status, f.error_type, f.error_message) == (FlowState.FAILED, "STEP_DECISION_FAILED", "no stock")


@pytest.mark.parametrize("who", ["stale-owner", "flow-closed"])
def test_complete_of_an_attempt_that_lost_its_step_is_fenced_and_rolls_back(store: Store, defs: Definitions,
                                                                          who: str) -> None:
    first = started_by(store, defs)
    k = key(first, "stale") if who == "stale-owner" else key(first)
    if who == "flow-closed":
        with store.tx() as tx:
            t.stop(tx, "f", "TERMINATE", "ops", T0 + 1)
    before = (flow(store), steps(store), store.attempts_of("f"), store.history_of("f"))
    with pytest.raises(t.Fenced), store.tx() as tx:
        t.complete(tx, k, first.step, T0, decision(DecisionKind.NEXT, nxt(defs, "Work"), nxt(defs, "Once")),
                   first.definition, T0 + 2, lease_next=True)
    assert (flow(store), steps(store), store.attempts_of("f"), store.history_of("f")) == before


# ---------------------------------------------------------------------------- fail ---------
def test_fail_schedules_the_retry_after_the_policys_backoff(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    d = definition(defs)
    delays, leased = [], work
    for n, at in enumerate((T0 + 3, T0 + 10, T0 + 30), start=1):
        with store.tx() as tx:
            failed = t.fail(tx, leased.step, "me", boom(at), defs, at)
        assert failed.retry and failed.closed is None and failed.next_attempt_at == at + failed.delay
        delays.append(failed.delay)
        s = steps(store)["Work-1"]
        assert (s.status, s.next_attempt_at, s.attempt) == (StepState.BACKOFF, at + failed.delay, n)
        (a,) = [a for a in store.attempts_of("f") if a.step_execution_id == "Work-1" and a.attempt == n]
        assert (a.outcome, a.end_time, a.error_type, a.detail) == (
            AttemptOutcome.FAILED, at, "builtins.RuntimeError", "boom")
        (r,) = _runnable(store, at + failed.delay)
        with store.tx() as tx:
            got = t.lease(tx, r, d, d.steps["Work"], "me", at + failed.delay)
        assert got is not None
        leased = got
    assert delays == [2.0, 6.0, 10.0]  # 2 s, x3, capped at 10 s
    assert flow(store).is_running and [e for e, _ in events(store)].count("StepExecuteFailed") == 0


def test_fail_uses_the_retry_after_delay_and_never_schedules_in_the_past(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    with store.tx() as tx:
        failed = t.fail(tx, work.step, "me", boom(T0 + 3, delay_override=45.0), defs, T0 + 3)
    assert (failed.delay, failed.next_attempt_at) == (45.0, T0 + 48)
    (r,) = _runnable(store, T0 + 48)
    with store.tx() as tx:
        again = t.lease(tx, r, work.definition, work.spec, "me", T0 + 48)
        assert again is not None
        # a deadline that passed long ago (a reaped attempt): the retry is due now, not in the past
        failed = t.fail(tx, again.step, "me", t.Failure("Heartbeat", "late", T0 + 50, AttemptOutcome.LOST), defs,
                        T0 + 500)
    assert (failed.delay, failed.next_attempt_at) == (6.0, T0 + 500)  # attempt 2: 2 s x 3
    assert steps(store)["Work-1"].next_attempt_at == T0 + 500


def test_fail_once_exhausted_routes_to_the_execute_failure_step(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    d = definition(defs)
    last = work
    for at in (T0 + 3, T0 + 10, T0 + 20):  # attempts 1-3 fail and are retried
        with store.tx() as tx:
            failed = t.fail(tx, last.step, "me", boom(at), defs, at)
            assert failed.retry and failed.next_attempt_at is not None
            (r,) = tx.runnable_steps(failed.next_attempt_at, None, 10)
            got = t.lease(tx, r, d, d.steps["Work"], "me", failed.next_attempt_at)
        assert got is not None
        last = got
    assert last.step.attempt == 4
    with store.tx() as tx:
        failed = t.fail(tx, last.step, "me", boom(T0 + 21), defs, T0 + 21)
    assert failed == t.Failed(False, reason="attempts exhausted", recovery_step_execution_id="Recover-1")
    s = steps(store)
    assert (s["Work-1"].status, s["Work-1"].end_time) == (StepState.FAILED, T0 + 21)
    rec = s["Recover-1"]
    assert (rec.status, rec.input, rec.from_step_execution_id, rec.scheduled_at, rec.next_attempt_at) == (
        StepState.QUEUED, "5", "Work-1", T0 + 21, T0 + 21)
    assert json.loads(rec.recovery_error or "") == {"detail": "boom", "error_type": "builtins.RuntimeError"}
    assert rec.options == nxt(defs, "Recover").options.to_json()
    assert flow(store).is_running
    assert events(store)[-1] == ("StepExecuteFailed", {
        "stepExecutionId": "Work-1", "fromStepExecutionId": "Start-1", "stepType": "Work", "attempt": 4,
        "errorType": "builtins.RuntimeError", "detail": "boom", "reason": "attempts exhausted",
        "recoveryStepExecutionId": "Recover-1", "stackTrace": None})


def test_fail_once_exhausted_without_a_route_fails_the_flow(store: Store, defs: Definitions) -> None:
    (once,) = moved_to(store, defs, "Once")
    with store.tx() as tx:
        failed = t.fail(tx, once.step, "me", boom(T0 + 3), defs, T0 + 3)
    message = "boom"  # the worker's detail, as a Dex server reports it; why is in StepExecuteFailed
    assert failed == t.Failed(False, reason="attempts exhausted",
                              closed=t.Closed(FlowState.FAILED, "WORKER_API_FAILED", message))
    f = flow(store)
    assert (f.status, f.close_time, f.error_type, f.error_message) == (
        FlowState.FAILED, T0 + 3, "WORKER_API_FAILED", message)
    assert steps(store)["Once-1"].status is StepState.FAILED
    assert [e for e, _ in events(store)][-2:] == ["StepExecuteFailed", "FlowClosed"]
    assert (events(store)[-2][1]["attempt"], events(store)[-2][1]["reason"]) == (1, "attempts exhausted")


def test_fail_once_total_duration_is_spent_fails_the_flow(store: Store, defs: Definitions) -> None:
    (short,) = moved_to(store, defs, "Short", at=T0 + 1)
    with store.tx() as tx:  # the retry (1 s backoff) would start 5 s after the step was scheduled
        failed = t.fail(tx, short.step, "me", boom(T0 + 5), defs, T0 + 5)
    assert failed.reason == "TotalDuration spent" and failed.closed is not None
    assert flow(store).error_message == "boom"
    assert events(store)[-2][1]["reason"] == "TotalDuration spent"


def test_a_fatal_failure_fails_the_flow_even_with_a_route(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work")
    with store.tx() as tx:
        failed = t.fail(tx, work.step, "me", t.Failure("dexcli.FlowCodeError", "bad code", T0 + 3, fatal=True),
                        defs, T0 + 3)
    assert failed == t.Failed(False, reason="fatal", closed=t.Closed(
        FlowState.FAILED, "INVALID_USER_FLOW_CODE", "Work-1: bad code"))
    assert (flow(store).status, flow(store).error_type) == (FlowState.FAILED, "INVALID_USER_FLOW_CODE")
    assert "Recover-1" not in steps(store)


@pytest.mark.parametrize("who", ["stale-owner", "flow-closed"])
def test_fail_of_an_attempt_that_lost_its_step_is_fenced(store: Store, defs: Definitions, who: str) -> None:
    (work,) = moved_to(store, defs, "Work")
    if who == "flow-closed":
        with store.tx() as tx:
            t.stop(tx, "f", "CANCEL", None, T0 + 2)
    before = (flow(store), steps(store), store.attempts_of("f"), store.history_of("f"))
    with pytest.raises(t.Fenced), store.tx() as tx:
        t.fail(tx, work.step, "stale" if who == "stale-owner" else "me", boom(T0 + 3), defs, T0 + 3)
    assert (flow(store), steps(store), store.attempts_of("f"), store.history_of("f")) == before


# ---------------------------------------------------------------------------- reap ---------
def _expired(store: Store, now: float, owner: str = "me") -> list[StepRecord]:
    return [s for s, _ in store.read(lambda tx: tx.expired_foreign_attempts(now, owner, None))]


def test_reap_declares_a_dead_owners_attempt_lost_then_retries(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work", owner="dead")  # heartbeat deadline T0 + 31
    (seen,) = _expired(store, T0 + 40)
    with store.tx() as tx:
        reaped = t.reap(tx, seen, defs, T0 + 40)
    assert reaped is not None
    failure, failed = reaped
    assert (failure.error_type, failure.at, failure.outcome) == ("Heartbeat", T0 + 31, AttemptOutcome.LOST)
    assert failure.detail == "no heartbeat or Stream message within HeartbeatTimeout of 30 s"
    assert failed.retry and failed.next_attempt_at == T0 + 40  # 31 + 2 s backoff is already past
    (a,) = [a for a in store.attempts_of("f") if a.step_execution_id == "Work-1"]
    assert (a.outcome, a.end_time, a.error_type, a.owner) == (AttemptOutcome.LOST, T0 + 31, "Heartbeat", "dead")
    assert steps(store)["Work-1"].status is StepState.BACKOFF


def test_reap_names_the_first_deadline_that_passed(store: Store, defs: Definitions) -> None:
    first = started_by(store, defs, owner="dead")  # heartbeat T0 + 60, attempt T0 + 7200
    with store.tx() as tx:
        tx.c.execute("UPDATE steps SET heartbeat_deadline = ?, attempt_deadline = ?", (T0 + 500, T0 + 100))
    (seen,) = _expired(store, T0 + 200)
    with store.tx() as tx:
        reaped = t.reap(tx, seen, defs, T0 + 200)
    assert reaped is not None and (reaped[0].error_type, reaped[0].at) == ("StartToClose", T0 + 100)
    assert first.step.step_execution_id == "Start-1"


def test_reap_of_an_attempt_that_moved_on_writes_nothing(store: Store, defs: Definitions) -> None:
    (work,) = moved_to(store, defs, "Work", owner="dead")
    (seen,) = _expired(store, T0 + 40)
    with store.tx() as tx:  # another process reaped it first and leased attempt 2
        assert t.reap(tx, seen, defs, T0 + 40) is not None
        (r,) = tx.runnable_steps(T0 + 40, None, 10)
        assert t.lease(tx, r, work.definition, work.spec, "third", T0 + 40) is not None
    before = (steps(store), store.attempts_of("f"), store.history_of("f"))
    with store.tx() as tx:
        assert t.reap(tx, seen, defs, T0 + 41) is None
    assert (steps(store), store.attempts_of("f"), store.history_of("f")) == before


def test_reap_of_a_completed_attempt_writes_nothing(store: Store, defs: Definitions) -> None:
    first = started_by(store, defs, owner="slow")
    (seen,) = _expired(store, T0 + 61)
    with store.tx() as tx:  # the owner was alive after all, and committed its decision first
        t.complete(tx, key(first, "slow"), first.step, T0, decision(DecisionKind.DEAD_END), first.definition,
                   T0 + 61, False)
    before = (flow(store), steps(store), store.attempts_of("f"))
    with store.tx() as tx:
        assert t.reap(tx, seen, defs, T0 + 62) is None
    assert (flow(store), steps(store), store.attempts_of("f")) == before


# ---------------------------------------------------------------------------- stop, close --
@pytest.mark.parametrize("stop_type,status,error_type", [
    ("CANCEL", FlowState.CANCELED, None),
    ("TERMINATE", FlowState.TERMINATED, None),
    ("FAIL", FlowState.FAILED, "CLIENT_API_FAILED"),
])
def test_stop_closes_the_flow_with_its_status(store: Store, defs: Definitions, stop_type: str,
                                              status: FlowState, error_type: str | None) -> None:
    moved_to(store, defs, "Work", "Recover")
    with store.tx() as tx:
        closed = t.stop(tx, "f", stop_type, "by ops", T0 + 9)
    assert closed == t.Closed(status, error_type, "by ops")
    f = flow(store)
    assert (f.status, f.close_time, f.error_type, f.error_message) == (status, T0 + 9, error_type, "by ops")
    assert {s.status for s in store.steps_of("f") if s.step_execution_id != "Start-1"} == {StepState.CANCELED}
    assert set(outcomes(store).values()) == {AttemptOutcome.COMPLETED, AttemptOutcome.CANCELED}
    assert events(store)[-1] == ("FlowClosed", {"flowStatus": status.value, "errorType": error_type,
                                                "errorMessage": "by ops", "results": []})


def test_stop_without_a_reason_says_how_it_stopped(store: Store, defs: Definitions) -> None:
    started_by(store, defs)
    with store.tx() as tx:
        t.stop(tx, "f", "TERMINATE", None, T0 + 1)
    assert flow(store).error_message == "stopped (terminate)"
    assert events(store)[-1][1]["errorMessage"] == "stopped (terminate)"


def test_stop_refuses_a_closed_or_unknown_flow(store: Store, defs: Definitions) -> None:
    started_by(store, defs)
    with store.tx() as tx:
        t.stop(tx, "f", "CANCEL", None, T0 + 1)
    closed = flow(store)
    with store.tx() as tx:
        with pytest.raises(FlowNotActiveOrNotFoundError, match="already CANCELED"):
            t.stop(tx, "f", "FAIL", "again", T0 + 2)
        with pytest.raises(FlowNotActiveOrNotFoundError, match="not found"):
            t.stop(tx, "nope", "CANCEL", None, T0 + 2)
    assert flow(store) == closed
    assert [e for e, _ in events(store)].count("FlowClosed") == 1


def test_close_reports_the_collected_outputs_and_if_idle_leaves_a_busy_flow_open(store: Store,
                                                                                   defs: Definitions) -> None:
    work, rec = moved_to(store, defs, "Work", "Recover")
    with store.tx() as tx:
        tx.set_flow_outputs("f", '[{"output": 1}]', False)
        assert not t.close(tx, "f", T0 + 5, t.Closed(FlowState.COMPLETED), if_idle=True)  # Work-1 runs
    assert flow(store).status is FlowState.RUNNING and events(store)[-1][0] != "FlowClosed"
    with store.tx() as tx:
        assert t.close(tx, "f", T0 + 5, t.Closed(FlowState.COMPLETED))
    assert events(store)[-1][1]["results"] == [{"output": 1}]
    assert steps(store)["Work-1"].status is StepState.CANCELED
    assert (flow(store).status, flow(store).completions) == (FlowState.COMPLETED, '[{"output": 1}]')


def test_close_of_a_flow_that_is_already_closed_records_nothing(store: Store, defs: Definitions) -> None:
    """Every caller checks first today; the transition itself must not end a flow twice."""
    started_by(store, defs)
    with store.tx() as tx:
        t.stop(tx, "f", "CANCEL", "first", T0 + 1)
    before = (flow(store), store.history_of("f"))
    with store.tx() as tx:
        t.close(tx, "f", T0 + 2, t.Closed(FlowState.FAILED, "X", "second"))
    assert (flow(store), store.history_of("f")) == before


# ---------------------------------------------------------------------------- release_left -
def test_release_left_ends_every_attempt_still_leased_to_the_owner_and_no_other(store: Store,
                                                                                defs: Definitions) -> None:
    started_by(store, defs, "me", "a")
    started_by(store, defs, "me", "b")
    started_by(store, defs, "other", "c")
    with store.tx() as tx:
        tx.c.execute("UPDATE flows SET clock_offset = 30 WHERE flow_id = 'b'")
        assert t.release_left(tx, "me", T0 + 5) == 2
    for fid, ended in (("a", T0 + 5), ("b", T0 + 35)):  # at each flow's own clock
        (s,) = store.steps_of(fid)
        (a,) = store.attempts_of(fid)
        assert (s.status, s.lease_owner, s.next_attempt_at) == (StepState.QUEUED, None, ended)
        assert (a.outcome, a.end_time) == (AttemptOutcome.INTERRUPTED, ended)
    assert steps(store, "c")["Start-1"].lease_owner == "other"
    with store.tx() as tx:
        assert t.release_left(tx, "me", T0 + 6) == 0


# ------------------------------------------------------------------- continue-as-new --------
def test_continue_as_new_archives_the_run_and_carries_what_is_open_in_one_transaction(
        store: Store, defs: Definitions) -> None:
    work, _ = moved_to(store, defs, "Work", "Recover")  # Start-1 completed; Work-1 and Recover-1 leased
    with store.tx() as tx:
        t.fail(tx, work.step, "me", boom(T0 + 2), defs, T0 + 2)  # Work-1 backs off: one failed attempt
    old = flow(store)
    with store.tx() as tx:
        done = t.continuing.continue_as_new(tx, "f", T0 + 5, "test")
    archived = f"f${old.run_id}"
    assert (done.previous_run_id, done.archived_as, done.carried) == (old.run_id, archived, ("Work-1", "Recover-1"))
    new = flow(store)
    assert (new.run_id, new.first_run_id, new.status, new.start_time) == (done.run_id, old.run_id,
                                                                         FlowState.RUNNING, T0 + 5)
    assert json.loads(new.step_numbers or "{}") == {"Start": 1, "": 1}
    gone = flow(store, archived)
    assert (gone.run_id, gone.status, gone.close_time) == (old.run_id, FlowState.CONTINUED_AS_NEW, T0 + 5)
    assert set(steps(store)) == {"Work-1", "Recover-1"} and set(steps(store, archived)) == {"Start-1"}
    assert outcomes(store)[("Work-1", 1)] is AttemptOutcome.FAILED  # its attempts go with it
    assert [e for e, _ in events(store, archived)] == ["FlowStarted", "StepExecuteCompleted", "FlowClosed"]
    assert events(store, archived)[-1][1]["continuedToRunId"] == done.run_id
    ((kind, started),) = events(store)
    assert kind == "FlowContinued" and started["previousRunId"] == old.run_id
    assert [s["stepExecutionId"] for s in started["stepsToResume"]] == ["Work-1", "Recover-1"]
    # the next step execution of a type an earlier run numbered numbers on from it
    with store.tx() as tx:
        assert tx.next_step_number("f", "Start") == (2, 4)
        assert tx.next_step_number("f", "Work") == (2, 4)


def test_continue_as_new_that_fails_leaves_everything_as_it_was(store: Store, defs: Definitions) -> None:
    moved_to(store, defs, "Work")
    before = (flow(store), steps(store), events(store))
    with pytest.raises(RuntimeError), store.tx() as tx:
        t.continuing.continue_as_new(tx, "f", T0 + 5, "test")
        raise RuntimeError("the process dies before COMMIT")
    assert (flow(store), steps(store), events(store)) == before
    assert store.get_flow(f"f${before[0].run_id}") is None


def test_continue_as_new_refuses_a_closed_or_unknown_flow(store: Store, defs: Definitions) -> None:
    started_by(store, defs)
    with store.tx() as tx:
        t.stop(tx, "f", "CANCEL", None, T0 + 1)
    for flow_id in ("f", "nope"):
        with pytest.raises(FlowNotActiveOrNotFoundError), store.tx() as tx:
            t.continuing.continue_as_new(tx, flow_id, T0 + 2, "test")
    assert flow(store).status is FlowState.CANCELED


def test_update_config_merges_into_the_running_flows(store: Store, defs: Definitions) -> None:
    started_by(store, defs)
    with store.tx() as tx:
        t.continuing.update_config(tx, "f", {"continueAsNewThreshold": 3}, T0 + 1)
        t.continuing.update_config(tx, "f", {"stepDurability": "STEP_DURABILITY_ASYNC"}, T0 + 2)
    assert flow(store).config == {"continueAsNewThreshold": 3, "stepDurability": "STEP_DURABILITY_ASYNC"}
    assert events(store)[1:] == [
        ("FlowConfigUpdated", {"update": {"continueAsNewThreshold": 3}, "flowConfig": {"continueAsNewThreshold": 3}}),
        ("FlowConfigUpdated", {"update": {"stepDurability": "STEP_DURABILITY_ASYNC"}, "flowConfig": {
            "continueAsNewThreshold": 3, "stepDurability": "STEP_DURABILITY_ASYNC"}})]


def test_an_update_that_lowers_the_threshold_to_what_the_run_has_reached_rolls_it_over(
        store: Store, defs: Definitions) -> None:
    moved_to(store, defs, "Work")  # Start-1's completion: 1 tracked event
    first = flow(store).run_id
    with store.tx() as tx:
        t.continuing.update_config(tx, "f", {"continueAsNewThreshold": 2}, T0 + 3)  # the update is the 2nd
    assert flow(store).run_id != first and [e for e, _ in events(store)] == ["FlowContinued"]


def test_resolved_options_follow_the_step_options_object_asked_for(defs: Definitions) -> None:
    """Definitions.options answers the same StepOptions object from its last entry: another
    object (a movement's options for the same step) is resolved from itself, and the step's
    own again from its own."""
    d = definition(defs)
    spec = d.steps["Work"]
    own = defs.options(d, spec)
    assert defs.options(d, spec) is own
    short = StepOptions(execute_method_timeout=timedelta(seconds=7))
    moved = defs.options(d, spec, short)
    assert moved.method_timeout == 7 and moved is not own
    assert defs.options(d, spec, short) is moved and defs.options(d, spec) is own
    assert defs.options(d, spec, StepOptions(execute_method_timeout=timedelta(seconds=7))) == moved


def test_resolved_options_are_stored_compact_and_rows_written_before_read_the_same(defs: Definitions) -> None:
    """A step's options JSON names a failure route only when it has one, without spaces (it
    is stored with every step execution); a row written with both keys as null reads back as
    the same options."""
    d = definition(defs)
    plain = defs.options(d, d.steps["Start"])
    text = plain.to_json()
    assert " " not in text and "failureStep" not in text
    assert ResolvedOptions.from_json(text) == plain
    older = json.dumps({**json.loads(text), "failureStep": None, "failureStepOptions": None})
    assert ResolvedOptions.from_json(older) == plain
    routed = defs.options(d, d.steps["Work"])
    assert routed.failure_step is not None and ResolvedOptions.from_json(routed.to_json()) == routed
