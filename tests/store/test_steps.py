"""Step and attempt rows: leasing only what is still as it was seen, writes for a running
attempt fenced by (owner, attempt, RUNNING), cancellation, and what is runnable or expired."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from dexcli.store import AttemptOutcome, AttemptRecord, FlowState, Method, StepState, Store, Tx
from tests.store.builders import T0, add_flow, add_running, add_step, make_step, step


@pytest.fixture
def scene(store: Store) -> Store:
    with store.tx() as tx:
        add_flow(tx, "f")
    return store


def test_a_step_reads_back_exactly_as_inserted(scene: Store) -> None:
    written = make_step("f", "Work-3", seq=7, from_step_execution_id="Start-1", input='{"a": [1]}',
                        status=StepState.BACKOFF, attempt=2, first_attempt_at=T0 + 1, next_attempt_at=T0 + 9,
                        lease_owner="host:1:x", attempt_started_at=T0 + 5, heartbeat_deadline=T0 + 66,
                        attempt_deadline=T0 + 605, recovery_error='{"detail": "d"}', method=Method.WAIT_FOR,
                        wait_options='{"w": 1}')
    with scene.tx() as tx:
        tx.insert_step(written)
        assert tx.get_step("f", "Work-3") == written
        assert tx.get_step("f", "Work-4") is None
    assert scene.steps_of("f") == [written]
    assert isinstance(step(scene, "f", "Work-3").status, StepState)


@pytest.mark.parametrize("later", [{"last_heartbeat_time": T0 + 6}, {"heartbeat_value": '"cp"'},
                                   {"has_heartbeat_value": True}, {"decision": "{}"}, {"end_time": T0},
                                   {"method_base": 1}, {"wait": "{}"}, {"wait_started": T0}, {"wait_ended": T0},
                                   {"condition_results": "{}"}, {"wait_for_failed": True}, {"locals": "{}"},
                                   {"lock_wait": "k"}], ids=lambda d: next(iter(d)))
def test_a_new_step_with_what_only_later_moves_write_is_refused(scene: Store, later: dict) -> None:
    """insert_step writes what a step has at its creation: a field a later move writes is refused,
    not silently left at its default."""
    with pytest.raises(ValueError, match="a new step has no"), scene.tx() as tx:
        tx.insert_step(make_step("f", "Work-3", **later))
    assert scene.steps_of("f") == []


# ---------------------------------------------------------------------------- lease_step ----
def test_lease_step_starts_the_first_attempt_of_a_queued_step(scene: Store) -> None:
    with scene.tx() as tx:
        seen = add_step(tx, "f", "A-1")
        assert tx.lease_step(seen, "me", T0 + 2, T0 + 62, T0 + 602)
    s = step(scene, "f", "A-1")
    assert (s.status, s.attempt, s.lease_owner) == (StepState.RUNNING, 1, "me")
    assert (s.attempt_started_at, s.first_attempt_at, s.next_attempt_at) == (T0 + 2, T0 + 2, None)
    assert (s.heartbeat_deadline, s.attempt_deadline, s.last_heartbeat_time) == (T0 + 62, T0 + 602, None)


def test_lease_step_of_a_backing_off_step_keeps_its_first_attempt_time(scene: Store) -> None:
    with scene.tx() as tx:
        seen = add_step(tx, "f", "A-1", status=StepState.BACKOFF, attempt=1, first_attempt_at=T0,
                        next_attempt_at=T0 + 1, lease_owner="before", last_heartbeat_time=T0 + 0.5)
        assert tx.lease_step(seen, "me", T0 + 3, T0 + 63, T0 + 603)
    s = step(scene, "f", "A-1")
    assert (s.status, s.attempt, s.lease_owner, s.first_attempt_at) == (StepState.RUNNING, 2, "me", T0)
    assert (s.attempt_started_at, s.last_heartbeat_time) == (T0 + 3, None)


def test_lease_step_refuses_a_step_that_moved_since_it_was_seen(scene: Store) -> None:
    with scene.tx() as tx:
        seen = add_step(tx, "f", "A-1")
        assert tx.lease_step(seen, "first", T0, T0 + 60, T0 + 600)
        assert not tx.lease_step(seen, "second", T0, T0 + 60, T0 + 600)  # it is RUNNING now
        backoff = add_step(tx, "f", "B-1", status=StepState.BACKOFF, attempt=2)
        stale = dataclasses.replace(backoff, attempt=1)  # seen before its second attempt
        assert not tx.lease_step(stale, "second", T0, T0 + 60, T0 + 600)
        done = add_step(tx, "f", "C-1", status=StepState.COMPLETED, attempt=1)
        assert not tx.lease_step(dataclasses.replace(done, status=StepState.QUEUED), "x", T0, T0, T0)
    assert step(scene, "f", "A-1").lease_owner == "first"
    assert (step(scene, "f", "B-1").status, step(scene, "f", "B-1").attempt) == (StepState.BACKOFF, 2)
    assert step(scene, "f", "C-1").status is StepState.COMPLETED


# ---------------------------------------------------------------------------- fenced writes -
FENCED: dict[str, Callable[[Tx, str, int], bool]] = {
    "record_heartbeat": lambda tx, owner, attempt: tx.record_heartbeat("f", "A-1", owner, attempt, T0 + 5,
                                                                       T0 + 65, (True, "7")),
    "complete_step": lambda tx, owner, attempt: tx.complete_step("f", "A-1", owner, attempt, '{"kind": "x"}',
                                                                 T0 + 5),
    "backoff_step": lambda tx, owner, attempt: tx.backoff_step("f", "A-1", owner, attempt, T0 + 6),
    "fail_step": lambda tx, owner, attempt: tx.fail_step("f", "A-1", owner, attempt, T0 + 5),
}
AFTER: dict[str, dict[str, Any]] = {
    "record_heartbeat": {"status": StepState.RUNNING, "last_heartbeat_time": T0 + 5, "heartbeat_deadline": T0 + 65,
                         "has_heartbeat_value": True, "heartbeat_value": "7"},
    "complete_step": {"status": StepState.COMPLETED, "decision": '{"kind": "x"}', "end_time": T0 + 5},
    "backoff_step": {"status": StepState.BACKOFF, "next_attempt_at": T0 + 6},
    "fail_step": {"status": StepState.FAILED, "end_time": T0 + 5},
}


@pytest.mark.parametrize("method", FENCED)
def test_a_write_for_the_running_attempt_applies(scene: Store, method: str) -> None:
    with scene.tx() as tx:
        before = add_running(tx, "f", "A-1", "me", attempt=2)
        assert FENCED[method](tx, "me", 2) is True
    assert step(scene, "f", "A-1") == dataclasses.replace(before, **AFTER[method])


@pytest.mark.parametrize("method", FENCED)
@pytest.mark.parametrize("who", ["other-owner", "older-attempt", "not-running"])
def test_a_write_for_another_attempt_is_fenced(scene: Store, method: str, who: str) -> None:
    with scene.tx() as tx:
        before = add_running(tx, "f", "A-1", "me", attempt=2)
        if who == "not-running":
            assert tx.backoff_step("f", "A-1", "me", 2, T0 + 1)
            before = tx.get_step("f", "A-1")
        owner, attempt = ("intruder", 2) if who == "other-owner" else ("me", 1 if who == "older-attempt" else 2)
        assert FENCED[method](tx, owner, attempt) is False
    assert step(scene, "f", "A-1") == before


def test_record_heartbeat_keeps_sets_or_clears_the_checkpoint(scene: Store) -> None:
    with scene.tx() as tx:
        add_running(tx, "f", "A-1", "me")
        assert tx.record_heartbeat("f", "A-1", "me", 1, T0 + 1, T0 + 61, (True, '{"page": 2}'))
        assert tx.record_heartbeat("f", "A-1", "me", 1, T0 + 2, T0 + 62, None)
    s = step(scene, "f", "A-1")
    assert (s.last_heartbeat_time, s.heartbeat_deadline) == (T0 + 2, T0 + 62)
    assert (s.has_heartbeat_value, s.heartbeat_value) == (True, '{"page": 2}')
    with scene.tx() as tx:
        assert tx.record_heartbeat("f", "A-1", "me", 1, T0 + 3, T0 + 63, (False, None))
    s = step(scene, "f", "A-1")
    assert (s.has_heartbeat_value, s.heartbeat_value) == (False, None)


# ---------------------------------------------------------------------------- open steps ---
def test_active_step_count_counts_queued_running_and_backing_off(scene: Store) -> None:
    with scene.tx() as tx:
        add_step(tx, "f", "A-1")
        add_running(tx, "f", "B-1", "me")
        add_step(tx, "f", "C-1", status=StepState.BACKOFF, attempt=1)
        for i, state in enumerate((StepState.COMPLETED, StepState.FAILED, StepState.CANCELED)):
            add_step(tx, "f", f"D-{i + 1}", status=state)
        assert tx.active_step_count("f") == 3
        assert tx.active_step_count("nope") == 0


def test_cancel_open_steps_cancels_open_steps_and_running_attempts_only(scene: Store) -> None:
    with scene.tx() as tx:
        add_flow(tx, "g")
        add_step(tx, "f", "A-1")
        add_running(tx, "f", "B-1", "me")
        add_step(tx, "f", "C-1", status=StepState.BACKOFF, attempt=1)
        done = add_step(tx, "f", "D-1", status=StepState.COMPLETED, attempt=1, attempt_started_at=T0,
                        lease_owner="me", end_time=T0 + 1)  # its completing attempt lives on its row
        other = add_running(tx, "g", "B-1", "me")
        tx.cancel_open_steps("f", T0 + 10)
    steps = {s.step_execution_id: s for s in scene.steps_of("f")}
    for seid in ("A-1", "B-1", "C-1"):
        assert (steps[seid].status, steps[seid].end_time, steps[seid].lease_owner) == (
            StepState.CANCELED, T0 + 10, None), seid
    assert steps["D-1"] == done
    attempts = {(a.step_execution_id, a.attempt): a for a in scene.attempts_of("f")}
    assert (attempts[("B-1", 1)].outcome, attempts[("B-1", 1)].end_time) == (AttemptOutcome.CANCELED, T0 + 10)
    assert (attempts[("D-1", 1)].outcome, attempts[("D-1", 1)].end_time) == (AttemptOutcome.COMPLETED, T0 + 1)
    assert scene.steps_of("g") == [other]
    assert [a.outcome for a in scene.attempts_of("g")] == [AttemptOutcome.RUNNING]


# ---------------------------------------------------------------------------- runnable -----
def _runnable(store: Store, now: float, flow_ids: list[str] | None = None, limit: int = 100) -> list[str]:
    return [f"{r.step.flow_id}/{r.step.step_execution_id}"
            for r in store.read(lambda tx: tx.runnable_steps(now, flow_ids, limit))]


def test_runnable_steps_are_queued_or_backing_off_and_due_earliest_first(scene: Store) -> None:
    with scene.tx() as tx:
        add_flow(tx, "g")
        add_step(tx, "f", "Late-1", next_attempt_at=T0 + 30)
        add_step(tx, "f", "Retry-1", status=StepState.BACKOFF, attempt=1, next_attempt_at=T0 + 10)
        add_step(tx, "g", "Early-1", next_attempt_at=T0 + 5)
        add_step(tx, "f", "Future-1", next_attempt_at=T0 + 31)
        add_running(tx, "f", "Busy-1", "me")
        add_step(tx, "f", "Done-1", status=StepState.COMPLETED, next_attempt_at=T0)
    assert _runnable(scene, T0 + 30) == ["g/Early-1", "f/Retry-1", "f/Late-1"]
    assert _runnable(scene, T0 + 4) == []
    assert _runnable(scene, T0 + 30, ["f"]) == ["f/Retry-1", "f/Late-1"]
    assert _runnable(scene, T0 + 30, ["g", "nope"]) == ["g/Early-1"]
    assert _runnable(scene, T0 + 30, []) == []
    assert _runnable(scene, T0 + 30, limit=2) == ["g/Early-1", "f/Retry-1"]


def test_a_runnable_step_carries_what_a_claim_needs_of_its_flow(scene: Store) -> None:
    with scene.tx() as tx:
        add_flow(tx, "g", flow_type="Refunds", flow_ref="file:/x.py:Refunds")
        queued = add_step(tx, "g", "A-1")
        tx.close_flow("g", FlowState.CANCELED, T0, None, None)  # closed, its step not cancelled (yet)
        (r,) = tx.runnable_steps(T0, ["g"], 10)
    assert r.step == queued
    assert (r.flow_status, r.run_id, r.flow_type, r.flow_ref) == (
        FlowState.CANCELED, "run-g", "Refunds", "file:/x.py:Refunds")


# ---------------------------------------------------------------------------- expired ------
def test_expired_foreign_attempts_are_other_owners_past_their_first_deadline(scene: Store) -> None:
    with scene.tx() as tx:
        add_flow(tx, "g")
        add_running(tx, "f", "Hb-1", "other", heartbeat_deadline=T0 + 60)
        add_running(tx, "f", "Method-1", "other", heartbeat_deadline=T0 + 500, attempt_deadline=T0 + 50)
        add_running(tx, "f", "Total-1", "other", heartbeat_deadline=T0 + 500, total_deadline=T0 + 40)
        add_running(tx, "f", "Alive-1", "other", heartbeat_deadline=T0 + 61)
        add_running(tx, "f", "Mine-1", "me", heartbeat_deadline=T0)
        add_running(tx, "g", "Hb-1", "third", heartbeat_deadline=T0 + 1)
        add_step(tx, "f", "Queued-1", heartbeat_deadline=T0, attempt_deadline=T0)

    def expired(flow_ids: list[str] | None) -> set[str]:
        steps = scene.read(lambda tx: tx.expired_foreign_attempts(T0 + 60, "me", flow_ids))
        return {f"{s.flow_id}/{s.step_execution_id}" for s, _ in steps}

    assert expired(None) == {"f/Hb-1", "f/Method-1", "f/Total-1", "g/Hb-1"}
    assert expired(["f"]) == {"f/Hb-1", "f/Method-1", "f/Total-1"}
    assert expired([]) == set()
    seen_by_other = scene.read(lambda tx: tx.expired_foreign_attempts(T0 + 60, "other", ["f"]))
    assert [(s.step_execution_id, s.lease_owner, off) for s, off in seen_by_other] == [("Mine-1", "me", 0.0)]


# ---------------------------------------------------------------------------- attempts -----
def test_attempt_rows_record_start_end_and_counters(scene: Store) -> None:
    """The running attempt is on its step's row (counters included); ending it writes its row."""
    with scene.tx() as tx:
        add_running(tx, "f", "A-1", "me", at=T0)
        assert tx.record_heartbeat("f", "A-1", "me", 1, T0 + 4, T0 + 64, None, 2, 1)
        assert tx.record_heartbeat("f", "A-1", "me", 1, T0 + 8, T0 + 68, None, 1, 3)
        assert not tx.record_heartbeat("f", "A-1", "other", 1, T0 + 8, T0 + 68, None, 5, 5)  # fenced
    running = AttemptRecord(flow_id="f", step_execution_id="A-1", attempt=1, owner="me", start_time=T0,
                            end_time=None, outcome=AttemptOutcome.RUNNING, error_type=None, detail=None,
                            heartbeats=3, last_heartbeat=T0 + 8, stream_writes=4)
    assert scene.attempts_of("f") == [running]
    with scene.tx() as tx:
        assert tx.backoff_step("f", "A-1", "me", 1, T0 + 20)
        tx.end_attempt("f", "A-1", 1, "me", T0 + 9, AttemptOutcome.TIMED_OUT, "Heartbeat", "no heartbeat")
    assert scene.attempts_of("f") == [replace(running, end_time=T0 + 9, outcome=AttemptOutcome.TIMED_OUT,
                                              error_type="Heartbeat", detail="no heartbeat")]


def test_attempts_of_are_in_start_order(scene: Store) -> None:
    with scene.tx() as tx:
        add_running(tx, "f", "B-1", "me", at=T0 + 1)
        add_running(tx, "f", "A-1", "me", at=T0)
        tx.end_attempt("f", "A-1", 1, "me", T0 + 2, AttemptOutcome.FAILED)
        tx.c.execute("UPDATE steps SET status = 'BACKOFF' WHERE step_execution_id = 'A-1'")
        a1 = tx.get_step("f", "A-1")
        assert a1 is not None and tx.lease_step(a1, "me", T0 + 5, T0 + 65, T0 + 605)
        add_running(tx, "f", "C-1", "me", at=T0 + 1)
    assert [(a.step_execution_id, a.attempt) for a in scene.attempts_of("f")] == [
        ("A-1", 1), ("B-1", 1), ("C-1", 1), ("A-1", 2)]


def test_steps_of_are_in_creation_order(scene: Store) -> None:
    with scene.tx() as tx:
        add_flow(tx, "g")
        for seq, seid in ((3, "C-1"), (1, "Z-1"), (2, "A-1")):
            add_step(tx, "f", seid, seq=seq)
        add_step(tx, "g", "Other-1")
    assert [s.step_execution_id for s in scene.steps_of("f")] == ["Z-1", "A-1", "C-1"]
    assert scene.steps_of("nope") == []


def test_new_steps_with_different_columns_set_read_back_exactly_as_inserted_in_one_call(scene: Store) -> None:
    """insert_steps writes each step with the columns it has a value for (None left to the
    column's default): a queued, a leased and a recovery step in one call, each read back whole."""
    queued = make_step("f", "A-1", seq=1)
    leased = make_step("f", "B-1", seq=2, status=StepState.RUNNING, attempt=1, first_attempt_at=T0,
                       next_attempt_at=None, lease_owner="me", attempt_started_at=T0, heartbeat_deadline=T0 + 60,
                       attempt_deadline=T0 + 600)
    leased_too = dataclasses.replace(leased, step_execution_id="B-2", seq=3)
    recovery = make_step("f", "C-1", seq=4, recovery_error='{"detail": "d"}', input=None, total_deadline=None)
    queued_too = dataclasses.replace(queued, step_execution_id="A-2", seq=5)
    with scene.tx() as tx:
        tx.insert_steps([queued, leased, leased_too, recovery, queued_too])
    assert scene.steps_of("f") == [queued, leased, leased_too, recovery, queued_too]


def test_a_worker_pass_reads_the_earliest_due_across_states_and_clocks_as_one_sort_would(scene: Store) -> None:
    """Of every flow, runnable_steps reads each state of steps_open in due order, and the flows
    with an offset apart (`indexed.due_first`): merged, they must be what one ORDER BY of every
    open step's real due time gives, at every `now` and `limit`; the schedule's earliest due
    likewise. Flows skipped ahead interleave with those on real time, ties included."""
    import random

    rng = random.Random(7)
    states = (StepState.QUEUED, StepState.BACKOFF, StepState.WAITING, StepState.RUNNING, StepState.COMPLETED)
    offsets = {"f": 0.0}
    with scene.tx() as tx:
        for i in range(12):
            add_flow(tx, f"g{i}")
            offsets[f"g{i}"] = 0.0
        for i in range(60):
            flow_id = rng.choice(sorted(offsets))
            status = rng.choice(states)
            at = T0 + rng.choice((0, 5, 10, 10, 20, 35, 50))
            if status is StepState.RUNNING:
                add_running(tx, flow_id, f"S{i}-1", "other")
            else:
                add_step(tx, flow_id, f"S{i}-1", status=status, attempt=int(status is StepState.BACKOFF),
                         next_attempt_at=at)
    for flow_id, ahead in (("g1", 7.0), ("g2", 30.0), ("g3", 30.0), ("g4", 12.5)):
        scene.skip_flows([flow_id], ahead)
    offsets.update(scene.flow_offsets(None))
    assert sorted(f for f, off in offsets.items() if off) == ["g1", "g2", "g3", "g4"]
    rows = scene.read(lambda tx: tx.c.execute(
        "SELECT flow_id, step_execution_id, status, next_attempt_at FROM steps").fetchall())
    open_due = sorted((at - offsets[f], f"{f}/{seid}") for f, seid, status, at in rows
                      if status in ("QUEUED", "BACKOFF", "WAITING") and at is not None)
    assert len({d for d, _ in open_due}) < len(open_due)  # ties, so order among equals is not asserted
    for now in (T0 - 40, T0, T0 + 10, T0 + 22, T0 + 60):
        for limit in (1, 3, 8, 100):
            got = scene.read(lambda tx: tx.runnable_steps(now, None, limit))  # noqa: B023 - read at once
            want = [d for d, _ in open_due if d <= now][:limit]
            assert [r.step.next_attempt_at - r.clock_offset for r in got] == want, (now, limit)
            names = {f"{r.step.flow_id}/{r.step.step_execution_id}" for r in got}
            assert names <= {n for d, n in open_due if d <= now} and len(names) == len(got)
    assert scene.schedule(None, "me").due == open_due[0][0]


def test_a_worker_pass_reads_the_steps_open_index_in_order_not_every_open_step(scene: Store) -> None:
    """Each part of a worker-wide read of what is due (and of the schedule's earliest due) is a
    range of steps_open read in its order and stopped at the LIMIT, no sort of every open step;
    only the part for flows with an offset (few: time-skipped flows) sorts what it found through
    flows_offsets."""
    traced: list[str] = []
    scene.read(lambda tx: tx.c.set_trace_callback(traced.append))
    scene.read(lambda tx: tx.runnable_steps(T0, None, 10))
    scene.schedule(None, "me")
    scene.read(lambda tx: tx.c.set_trace_callback(None))
    plans = []
    for sql in traced:
        if "steps_open" in sql or "FROM steps" in sql:
            rows = scene.read(lambda tx: tx.c.execute("EXPLAIN QUERY PLAN " + sql, ()).fetchall())  # noqa: B023
            plans.append([str(r[-1]) for r in rows])
    real_parts = [p for p in plans if len(p) == 2 and "steps_open (status=? AND next_attempt_at<?)" in p[0]]
    assert len(real_parts) == 3, plans  # QUEUED, BACKOFF, WAITING: each a range, in index order
    schedule = next(p for p in plans if p[0] == "COMPOUND QUERY")
    ranges = [line for line in schedule if line.startswith("SEARCH s USING INDEX steps_open (status=? AND")]
    assert len(ranges) == 3, schedule
    for plan in plans:  # a sort only after the flows with an offset were found through their index
        for i, line in enumerate(plan):
            if "TEMP B-TREE" in line:
                assert any("flows_offsets" in earlier for earlier in plan[max(0, i - 2):i]), plan
