"""Store reads outside a transaction: flow lists, history, the schedule, kv (flows' clocks: test_clocks)."""

from __future__ import annotations

import json

import pytest

from dexcli.store import FlowState, Schedule, StepState, Store, json_object
from tests.store.builders import T0, add_flow, add_running, add_step


# ---------------------------------------------------------------------------- list_flows ---
@pytest.fixture
def five(store: Store) -> Store:
    """a..e started at T0+0..4 (c and d at the same time, d inserted later); b and d closed;
    e is a Refunds flow."""
    with store.tx() as tx:
        for fid, at in (("a", 0), ("b", 1), ("c", 2), ("d", 2)):
            add_flow(tx, fid, start_time=T0 + at)
        add_flow(tx, "e", start_time=T0 + 4, flow_type="Refunds")
        tx.close_flow("b", FlowState.COMPLETED, T0 + 5, None, None)
        tx.close_flow("d", FlowState.FAILED, T0 + 5, "X", "x")
    return store


def _ids(flows: list) -> list[str]:
    return [f.flow_id for f in flows]


def test_list_flows_is_newest_first_later_insert_first_on_ties(five: Store) -> None:
    assert _ids(five.list_flows()) == ["e", "d", "c", "b", "a"]


def test_list_flows_filters_by_status_and_type(five: Store) -> None:
    assert _ids(five.list_flows(status=FlowState.RUNNING)) == ["e", "c", "a"]
    assert _ids(five.list_flows(status=FlowState.FAILED)) == ["d"]
    assert _ids(five.list_flows(status=FlowState.CANCELED)) == []
    assert _ids(five.list_flows(flow_type="Orders")) == ["d", "c", "b", "a"]
    assert _ids(five.list_flows(status=FlowState.RUNNING, flow_type="Orders")) == ["c", "a"]
    assert _ids(five.list_flows(flow_type="Nope")) == []


def test_list_flows_limit_keeps_the_newest(five: Store) -> None:
    assert _ids(five.list_flows(limit=2)) == ["e", "d"]
    assert _ids(five.list_flows(status=FlowState.RUNNING, limit=1)) == ["e"]


def test_list_flows_returns_enums(five: Store) -> None:
    assert {f.flow_id: f.status for f in five.list_flows()}["d"] is FlowState.FAILED


# ---------------------------------------------------------------------------- history ------
def test_history_of_numbers_events_per_flow_from_1_in_event_order(store: Store) -> None:
    """Two flows' events interleaved in the table: each flow's history counts 1, 2, 3, ... (as
    in Dex), in insertion order; `after_event_id` is that per-flow number."""
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "g")
        tx.add_event("g", T0, "G0", {})
        for i in range(4):
            tx.add_event("f", T0 + i, f"E{i}", {"i": i})
            tx.add_event("g", T0 + i, f"G{i + 1}", {})
    events = store.history_of("f")
    assert [(e.event_id, e.type, json.loads(e.payload)) for e in events] == [
        (i + 1, f"E{i}", {"i": i}) for i in range(4)]
    assert [(e.event_id, e.type) for e in store.history_of("g")] == [(i + 1, f"G{i}") for i in range(5)]
    assert [e.type for e in store.history_of("f", after_event_id=2)] == ["E2", "E3"]
    assert store.history_of("f", after_event_id=4) == []


def test_events_a_transaction_adds_after_its_first_continue_the_flows_numbers(store: Store) -> None:
    """A transaction keys a flow's events after the first from the key it just wrote: numbers
    go on across transactions, and a run archived in the middle of one (its history moved to the
    archived row's range) leaves the new run of the flow id numbering from 1 again."""
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.add_event("f", T0, "A1", {})
        tx.add_event("f", T0, "A2", {})
    with store.tx() as tx:
        tx.add_event("f", T0 + 1, "A3", {})
        tx.add_event("f", T0 + 1, "A4", {})
        archived = tx.archive_run("f", "run-f")
        add_flow(tx, "f")
        tx.add_event("f", T0 + 2, "B1", {})
        tx.add_event("f", T0 + 2, "B2", {})
        tx.add_event(archived, T0 + 2, "A5", {})  # the archived run's own range goes on too
    assert [(e.event_id, e.type) for e in store.history_of(archived)] == [
        (1, "A1"), (2, "A2"), (3, "A3"), (4, "A4"), (5, "A5")]
    assert [(e.event_id, e.type) for e in store.history_of("f")] == [(1, "B1"), (2, "B2")]


def test_an_event_payload_may_come_already_encoded(store: Store) -> None:
    """json_object splices members whose values are JSON text as they are, between encoded
    parts, in order; add_event stores such text as given and a dict compactly."""
    text = json_object({"a": 1, "b": "x"}, ("input", '{"z": [1, 2], "y": null}'), {}, {"c": [True]})
    assert text == '{"a":1,"b":"x","input":{"z": [1, 2], "y": null},"c":[true]}'
    assert json_object() == "{}" and json_object(("k", "[]")) == '{"k":[]}'
    assert json.loads(json_object(('a "quoted" key', "1"), ("clé", "2"))) == {'a "quoted" key': 1, "clé": 2}
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.add_event("f", T0, "Spliced", text)
        tx.add_event("f", T0, "Plain", {"a": 1, "n": None})
    spliced, plain = store.history_of("f")
    assert list(json.loads(spliced.payload).items()) == [
        ("a", 1), ("b", "x"), ("input", {"z": [1, 2], "y": None}), ("c", [True])]
    assert plain.payload == '{"a":1,"n":null}'


# ---------------------------------------------------------------------------- schedule -----
def test_schedule_of_an_empty_database_or_no_flows(store: Store) -> None:
    assert store.schedule(None, "me") == Schedule(None, ())
    with store.tx() as tx:
        add_flow(tx, "f")
        add_step(tx, "f", "A-1")
        add_running(tx, "f", "B-1", "other")
    assert store.schedule([], "me") == Schedule(None, ())


def test_schedule_due_is_the_first_queued_or_retry_time(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "g")
        add_step(tx, "f", "A-1", next_attempt_at=T0 + 30)
        add_step(tx, "f", "B-1", status=StepState.BACKOFF, attempt=1, next_attempt_at=T0 + 20)
        add_step(tx, "g", "A-1", next_attempt_at=T0 + 10)
        add_step(tx, "f", "Done-1", status=StepState.COMPLETED, next_attempt_at=T0)
        add_running(tx, "f", "Mine-1", "me")
    assert store.schedule(None, "me").due == T0 + 10
    assert store.schedule(["f"], "me").due == T0 + 20
    assert store.schedule(["nope"], "me").due is None


def test_retrying_steps_are_queued_and_backing_off_steps_not_timers_or_start_delays(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "d")
        tx.c.execute("UPDATE flows SET start_delay = 3600 WHERE flow_id = 'd'")
        add_step(tx, "f", "Retry-1", status=StepState.BACKOFF, attempt=1, next_attempt_at=T0 + 20)
        add_step(tx, "f", "Again-1", attempt=2, next_attempt_at=T0 + 5)  # an attempt given back
        add_step(tx, "f", "Locked-1", lock_wait="counter", next_attempt_at=T0 + 1)
        add_step(tx, "f", "Next-1", from_step_execution_id="Retry-1", next_attempt_at=T0 + 2)
        add_step(tx, "f", "Waits-1", status=StepState.WAITING, attempt=1, next_attempt_at=T0 + 10)  # a timer
        add_step(tx, "d", "Delayed-1", next_attempt_at=T0 + 3600)  # its start delay: a timer
        add_step(tx, "d", "Later-1", from_step_execution_id="Delayed-1", next_attempt_at=T0 + 3)
    with store.tx() as tx:
        assert [s.step_execution_id for s, _ in tx.retrying_steps(None, 10)] == [
            "Locked-1", "Next-1", "Later-1", "Again-1", "Retry-1"]
        assert [s.step_execution_id for s, _ in tx.retrying_steps(["d"], 10)] == ["Later-1"]
        assert [s.step_execution_id for s, _ in tx.retrying_steps(["f"], 1)] == ["Locked-1"]
        assert tx.retrying_steps(["g"], 10) == [] and tx.retrying_steps([], 10) == []


def test_schedule_foreign_lists_other_owners_running_attempts_with_their_first_deadline(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "g")
        add_running(tx, "f", "A-1", "other", heartbeat_deadline=T0 + 60, attempt_deadline=T0 + 600)
        add_running(tx, "f", "B-1", "other", heartbeat_deadline=T0 + 60, attempt_deadline=T0 + 30)
        add_running(tx, "f", "C-1", "third", heartbeat_deadline=T0 + 60, total_deadline=T0 + 45)
        add_running(tx, "f", "Mine-1", "me", heartbeat_deadline=T0 + 1)
        add_running(tx, "g", "A-1", "other", heartbeat_deadline=T0 + 5)
    schedule = store.schedule(["f"], "me")
    assert schedule.due is None
    assert sorted(schedule.foreign, key=str) == sorted(
        [("other", T0 + 60), ("other", T0 + 30), ("third", T0 + 45)], key=str)
    assert len(store.schedule(None, "me").foreign) == 4
    assert sorted(store.schedule(None, "other").foreign, key=str) == sorted(
        [("third", T0 + 45), ("me", T0 + 1)], key=str)


# ---------------------------------------------------------------------------- kv -----------
def test_kv_round_trips_json_values_per_namespace(store: Store) -> None:
    assert store.kv_get("jobs", "j1") is None
    store.kv_put("jobs", "j1", {"state": "QUEUED", "tries": [1, 2]})
    store.kv_put("other", "j1", "x")
    assert store.kv_get("jobs", "j1") == {"state": "QUEUED", "tries": [1, 2]}
    store.kv_put("jobs", "j1", None)
    assert store.kv_get("jobs", "j1") is None
    assert store.kv_get("other", "j1") == "x"
    with store.tx() as tx:
        tx.kv_put("jobs", "j2", 3)
        assert tx.kv_get("jobs", "j2") == 3


def test_kv_update_is_read_modify_write_and_a_raise_changes_nothing(store: Store) -> None:
    assert store.kv_update("n", "count", lambda v: (v or 0) + 1) == 1
    assert store.kv_update("n", "count", lambda v: v + 1) == 2

    def refuse(value: int) -> int:
        raise ValueError(f"no: {value}")

    with pytest.raises(ValueError, match="no: 2"):
        store.kv_update("n", "count", refuse)
    assert store.kv_get("n", "count") == 2


# ------------------------------------------------------------------------- archived_runs ---
def test_archived_runs_are_the_ids_that_start_with_the_flow_id_and_the_separator(store: Store) -> None:
    """`<flow_id>$<run_id>` rows, oldest first (a range of the primary key, not a scan): not
    the flow itself, not an id that merely starts with the flow id, nor one with a neighbouring
    character ('#', '%') where the separator stands."""
    ids = ["a", "a$r2", "ab$x", "a%x", "a#x", "a$", "b$x", "a$r1", "é$1", "é", "a$$z", "a$\U0001f600"]
    with store.tx() as tx:
        for i, fid in enumerate(ids):
            add_flow(tx, fid, start_time=T0 + i)
    assert _ids(store.read(lambda tx: tx.archived_runs("a"))) == ["a$r2", "a$", "a$r1", "a$$z", "a$\U0001f600"]
    assert _ids(store.read(lambda tx: tx.archived_runs("é"))) == ["é$1"]
    assert _ids(store.read(lambda tx: tx.archived_runs("a$"))) == ["a$$z"]
    assert store.read(lambda tx: tx.archived_runs("zz")) == []
