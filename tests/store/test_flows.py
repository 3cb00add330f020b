"""Flow rows through a transaction: insert once, number steps, record outputs, close once."""

from __future__ import annotations

import pytest

from dexcli.store import FlowRecord, FlowState, StepState, Store, StoreError
from dexcli.store.errors import DamagedDatabaseError
from dexcli.store.records import ClosedFlow, FlowProgress
from tests.store.builders import T0, add_flow, add_running, add_step, flow


def test_insert_flow_if_new_writes_a_running_flow(store: Store) -> None:
    with store.tx() as tx:
        assert tx.insert_flow_if_new("f", "run-1", "Orders", "name:orders", '{"n": 1}', "req-1", T0)
    assert flow(store, "f") == FlowRecord(
        flow_id="f", run_id="run-1", flow_type="Orders", flow_ref="name:orders", status=FlowState.RUNNING,
        input='{"n": 1}', request_id="req-1", start_time=T0, close_time=None, error_type=None,
        error_message=None, graceful=False, completions="[]")


def test_insert_flow_if_new_refuses_a_taken_id_and_keeps_the_first(store: Store) -> None:
    with store.tx() as tx:
        assert tx.insert_flow_if_new("f", "run-1", "Orders", None, "1", "req-1", T0)
    first = flow(store, "f")
    with store.tx() as tx:
        assert not tx.insert_flow_if_new("f", "run-2", "Refunds", "name:refunds", "2", "req-2", T0 + 5)
    assert flow(store, "f") == first


def test_get_flow_of_an_unknown_id_is_none(store: Store) -> None:
    assert store.get_flow("nope") is None
    assert store.read(lambda tx: tx.get_flow("nope")) is None


def test_flow_progress_reads_what_a_completion_uses_and_counts_steps_of_the_type_and_in_all(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "other")
        add_step(tx, "f", "A-1", seq=1)
        add_step(tx, "f", "A-2", seq=2, status=StepState.COMPLETED)
        add_step(tx, "f", "B-1", seq=3)
        add_step(tx, "other", "A-1", seq=1)
        numbered_a = tx.flow_progress("f", "A")
        numbered_c = tx.flow_progress("f", "C")
        uncounted = tx.flow_progress("f", None)
        assert tx.flow_progress("nope", "A") is None
        assert tx.flow_progress("nope", None) is None
        add_flow(tx, "bare")  # no step yet: both counts 0, the flow still read
        bare = tx.flow_progress("bare", "A")
        assert bare is not None and bare[0].is_running and bare[1:] == (0, 0)
        assert tx.next_step_number("f", "A") == (3, 4)
        assert tx.next_step_number("f", "C") == (1, 4)
        assert tx.next_step_number("empty", "A") == (1, 1)
    assert numbered_a is not None and numbered_c is not None and uncounted is not None
    record, of_type, total = numbered_a
    whole = flow(store, "f")
    assert record == FlowProgress(whole.status, whole.run_id, whole.graceful, whole.completions,
                                  whole.flow_config, whole.step_numbers)
    assert (of_type, total) == (2, 3)
    assert numbered_c[1:] == (0, 3)
    assert uncounted == (record, 0, 0)


def test_flow_progress_refuses_a_damaged_completions_column(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.c.execute("UPDATE flows SET completions = '[{' WHERE flow_id = 'f'")
    with pytest.raises(DamagedDatabaseError, match="completions is not JSON"), store.tx() as tx:
        tx.flow_progress("f", None)


def test_set_flow_outputs_records_graceful_and_keeps_outputs_when_none_given(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.set_flow_outputs("f", '[{"output": 1}]', False)
    assert (flow(store, "f").graceful, flow(store, "f").completions) == (False, '[{"output": 1}]')
    with store.tx() as tx:
        tx.set_flow_outputs("f", None, True)
    assert (flow(store, "f").graceful, flow(store, "f").completions) == (True, '[{"output": 1}]')


def test_close_flow_closes_a_running_flow(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        assert tx.close_flow("f", FlowState.FAILED, T0 + 9, "WORKER_API_FAILED", "it broke", '["out"]')
    f = flow(store, "f")
    assert (f.status, f.close_time, f.error_type, f.error_message, f.completions) == (
        FlowState.FAILED, T0 + 9, "WORKER_API_FAILED", "it broke", '["out"]')
    assert not f.is_running


def test_close_flow_keeps_the_outputs_when_none_given(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.set_flow_outputs("f", '["kept"]', True)
        assert tx.close_flow("f", FlowState.COMPLETED, T0 + 1, None, None)
    assert flow(store, "f").completions == '["kept"]'


@pytest.mark.parametrize("second", [FlowState.COMPLETED, FlowState.CANCELED])
def test_close_flow_only_closes_a_running_flow(store: Store, second: FlowState) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        assert tx.close_flow("f", FlowState.TERMINATED, T0 + 1, None, "stopped")
    closed = flow(store, "f")
    with store.tx() as tx:
        assert not tx.close_flow("f", second, T0 + 2, "X", "again", '["late"]')
        assert not tx.close_flow("nope", second, T0 + 2, None, None)
    assert flow(store, "f") == closed


def test_close_flow_answers_what_its_followers_need_from_the_row(store: Store) -> None:
    """The close's own statement says what it closed with, whether the flow is a SubFlow and
    whether attribute snapshots are left: what follows the close reads the row no more."""
    with store.tx() as tx:
        add_flow(tx, "f")
        add_flow(tx, "child")
        tx.c.execute("UPDATE flows SET parent_flow_id = 'f', parent_step_execution_id = 'Parent-1' "
                     "WHERE flow_id = 'child'")
        tx.set_flow_outputs("f", '["kept"]', True)
        tx.put_attribute("f", "counter", "counter", None, "5", T0)
        add_running(tx, "f", "Reader-1", "me")
        tx.keep_call_snapshots("f", ["counter"], None)  # Reader-1's call keeps what is overwritten
        plain = tx.close_flow("f", FlowState.COMPLETED, T0 + 1, None, None)
        sub = tx.close_flow("child", FlowState.COMPLETED, T0 + 1, None, None, '["out"]')
    assert plain == ClosedFlow('["kept"]', has_parent=False, has_snapshots=True)
    assert sub == ClosedFlow('["out"]', has_parent=True, has_snapshots=False)


def test_close_flow_names_stored_outputs_that_are_not_json(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "f")
        tx.set_flow_outputs("f", "[oops", False)
    with pytest.raises(StoreError, match="completions"), store.tx() as tx:
        tx.close_flow("f", FlowState.COMPLETED, T0 + 1, None, None)
    status = store.read(lambda tx: tx.c.execute("SELECT status FROM flows WHERE flow_id = 'f'").fetchone()[0])
    assert status == "RUNNING"  # refused: nothing of the close is kept


def test_running_flow_ids_lists_only_running_flows(store: Store) -> None:
    with store.tx() as tx:
        for fid in ("a", "b", "c"):
            add_flow(tx, fid)
        tx.close_flow("b", FlowState.COMPLETED, T0 + 1, None, None)
    assert sorted(store.running_flow_ids()) == ["a", "c"]


def test_insert_flows_numbers_on_from_the_largest_number_and_keys_their_first_events(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "old")
        tx.c.execute("UPDATE flows SET num = 7 WHERE flow_id = 'old'")  # (an archived run's number moves)
    with store.tx() as tx:
        tx.insert_flows([("a", "run-a", "Orders", None, "1", "req-a", T0), ("b", "run-b", "Orders", "name:o", "2",
                                                                          "req-b", T0)])
        tx.add_events([("b", T0, "FlowStarted", "{}"), ("a", T0, "FlowStarted", "{}"), ("old", T0, "Note", "{}")])
        tx.add_event("a", T0, "Next", {})
    nums = dict(store._conn.execute("SELECT flow_id, num FROM flows").fetchall())
    assert nums == {"old": 7, "a": 8, "b": 9}
    keys = store._conn.execute("SELECT flow_id, type, seq FROM history ORDER BY seq").fetchall()
    assert keys == [("old", "Note", (7 << 24) + 1), ("a", "FlowStarted", (8 << 24) + 1),
                    ("a", "Next", (8 << 24) + 2), ("b", "FlowStarted", (9 << 24) + 1)]


def test_insert_flows_of_a_taken_id_raises(store: Store) -> None:
    with store.tx() as tx:
        add_flow(tx, "a")
    with pytest.raises(StoreError, match="1 of 2 new flow ids were taken"), store.tx() as tx:
        tx.insert_flows([("b", "run-b", "Orders", None, "1", "req-b", T0), ("a", "run-2", "Orders", None, "1",
                                                                          "req-2", T0)])
    assert store.get_flow("b") is None
