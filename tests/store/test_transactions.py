"""`store.tx()`: everything in it commits together, or (on any exception) nothing does; reads
take no write lock and see what other connections committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexcli.store import AttemptOutcome, Store
from tests.store.builders import T0, add_flow, add_running, add_step, raw


class Interrupt(BaseException):
    """Not an Exception: a KeyboardInterrupt or a cancellation arriving mid-transaction."""


def test_a_commit_is_visible_to_another_connection(store: Store, db: Path) -> None:
    before, spent, statements = store.commits, store.commit_seconds, store.statements
    with store.tx() as tx:
        add_flow(tx, "f")
        add_step(tx, "f", "A-1")
        tx.add_event("f", T0, "FlowStarted", {"x": 1})
    assert store.commits == before + 1
    assert store.statements == statements + 5  # BEGIN, the flow, the step, the event, COMMIT (bench/ counts them)
    assert store.commit_seconds > spent  # the COMMIT's time is counted (bench/ reports it per commit)
    assert raw(db, "SELECT flow_id FROM flows") == [("f",)]
    assert raw(db, "SELECT step_execution_id FROM steps") == [("A-1",)]
    assert raw(db, "SELECT type FROM history") == [("FlowStarted",)]


@pytest.mark.parametrize("error", [RuntimeError("boom"), Interrupt()], ids=["exception", "base-exception"])
def test_an_exception_rolls_everything_back(store: Store, db: Path, error: BaseException) -> None:
    before = store.commits
    with pytest.raises(type(error)), store.tx() as tx:
        add_flow(tx, "f")
        add_running(tx, "f", "A-1", "me")
        tx.end_attempt("f", "A-1", 1, "me", T0, AttemptOutcome.FAILED)
        tx.add_event("f", T0, "FlowStarted", {})
        tx.append_stream("Orders", "Progress", "f", "#A-1", '"x"', T0, 100, 1000)
        tx.kv_put("ns", "k", 1)
        raise error
    assert store.commits == before and store.commit_seconds == 0.0  # a rollback commits nothing
    for table in ("flows", "steps", "attempts", "history", "stream_messages", "stream_usage", "kv"):
        assert raw(db, f"SELECT COUNT(*) FROM {table}") == [(0,)], table
    with store.tx() as tx:  # the connection is usable again: no transaction left open
        add_flow(tx, "g")
    assert store.get_flow("g") is not None and store.get_flow("f") is None


def test_an_event_for_a_flow_that_is_not_there_is_refused_and_none_is_written(store: Store, db: Path) -> None:
    from dexcli.store.errors import StoreError

    with pytest.raises(StoreError, match="no flow 'ghost'"), store.tx() as tx:
        tx.add_event("ghost", T0, "FlowStarted", {})
    with pytest.raises(StoreError, match="no flow to go to"), store.tx() as tx:
        add_flow(tx, "f")
        tx.add_events([("f", T0, "A", "{}"), ("ghost", T0, "B", "{}")])
    assert raw(db, "SELECT COUNT(*) FROM history") == [(0,)] and store.get_flow("f") is None
    with store.tx() as tx:  # events are keyed per flow, one after another
        add_flow(tx, "f")
        tx.add_events([("f", T0, "A", "{}")])
    with store.tx() as tx:
        tx.add_event("f", T0, "B", {})
        tx.add_event("f", T0, "C", {})
    (num,) = raw(db, "SELECT num FROM flows WHERE flow_id = 'f'")[0]
    assert raw(db, "SELECT seq - (? << 24), type FROM history ORDER BY seq", (num,)) == [(1, "A"), (2, "B"), (3, "C")]


def test_a_rolled_back_stream_write_leaves_no_usage_behind(store: Store) -> None:
    with pytest.raises(RuntimeError), store.tx() as tx:
        tx.append_stream("Orders", "Progress", "f", "s", '"gone"', T0, 200, 300)
        raise RuntimeError("abort")
    with store.tx() as tx:
        a = tx.append_stream("Orders", "Progress", "f", "s", '"a"', T0, 200, 300)
    with store.tx() as tx:
        b = tx.append_stream("Orders", "Progress", "f", "s", '"b"', T0, 100, 300)
    # 200 + 100 fits the 300 bytes: nothing trimmed (phantom usage of the rolled-back write would evict a)
    assert [m.id for m in store.stream_messages("f")] == [a, b]


def test_uncommitted_writes_are_invisible_and_reads_do_not_wait_for_the_writer(store: Store, db: Path) -> None:
    other = Store(db)
    try:
        with store.tx() as tx:
            add_flow(tx, "f")
            # another connection reads while this one holds the write lock: it does not block
            assert other.get_flow("f") is None
            assert other.list_flows() == []
        assert other.get_flow("f") is not None
    finally:
        other.close()


def test_reads_see_commits_made_after_an_earlier_read(store: Store, db: Path) -> None:
    other = Store(db)
    try:
        with other.tx() as tx:
            add_flow(tx, "a")
        assert [f.flow_id for f in store.list_flows()] == ["a"]  # a read snapshot would stay open here
        with other.tx() as tx:
            add_flow(tx, "b", start_time=T0 + 1)
        assert [f.flow_id for f in store.list_flows()] == ["b", "a"]
        assert store.get_flow("b") is not None
    finally:
        other.close()


def test_two_stores_on_one_file_take_turns_writing(store: Store, db: Path) -> None:
    other = Store(db)
    try:
        with store.tx() as tx:
            add_flow(tx, "a")
        with other.tx() as tx:
            assert tx.get_flow("a") is not None  # a write transaction starts from the latest commit
            add_flow(tx, "b")
        assert {f.flow_id for f in store.list_flows()} == {"a", "b"}
    finally:
        other.close()
