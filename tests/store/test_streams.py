"""Stream messages: capacity is shared per (flow type, stream) and the oldest messages make
room; a message that can never fit is refused; reading pages forwards and backwards."""

from __future__ import annotations

import pytest

from dexcli.store import Store, StreamRecord
from tests.store.builders import T0


def _append(store: Store, *msgs: tuple[str, str, str, int], capacity: int = 1000) -> list[int | None]:
    """Append (flow_type, stream, flow_id, size) messages in one transaction."""
    with store.tx() as tx:
        return [tx.append_stream(ft, stream, fid, "#A-1", f'"{fid}:{i}"', T0 + i, size, capacity)
                for i, (ft, stream, fid, size) in enumerate(msgs)]


def _ids(store: Store, flow_id: str, stream: str | None = None) -> list[int]:
    return [m.id for m in store.stream_messages(flow_id, stream)]


def test_an_appended_message_reads_back_with_its_token(store: Store) -> None:
    with store.tx() as tx:
        token = tx.append_stream("Orders", "Progress", "f", "#Work-1", '{"pct": 50}', T0 + 3, 120, 1000)
    assert store.stream_messages("f") == [StreamRecord(
        id=token, flow_type="Orders", stream="Progress", flow_id="f", source="#Work-1", value='{"pct": 50}',
        created_time=T0 + 3, size=120)]


def test_tokens_increase(store: Store) -> None:
    a, b = _append(store, ("Orders", "P", "f", 10), ("Orders", "P", "g", 10))
    (c,) = _append(store, ("Orders", "P", "f", 10))
    assert a is not None and b is not None and c is not None
    assert a < b < c


def test_the_oldest_messages_of_the_flow_type_and_stream_make_room(store: Store) -> None:
    a, b, c = _append(store, ("Orders", "P", "f", 400), ("Orders", "P", "g", 400), ("Orders", "P", "f", 100))
    (d,) = _append(store, ("Orders", "P", "g", 300))  # 1200 > 1000: the oldest (a, of flow f) goes
    assert _ids(store, "f") == [c]
    assert _ids(store, "g") == [b, d]
    (e,) = _append(store, ("Orders", "P", "f", 500))  # b 400 + c 100 + d 300 + e 500: b (400) goes
    assert _ids(store, "f") == [c, e]
    assert _ids(store, "g") == [d]


def test_trimming_within_one_transaction_counts_the_messages_it_just_wrote(store: Store) -> None:
    tokens = _append(store, *[("Orders", "P", "f", 300)] * 5)
    assert _ids(store, "f") == tokens[2:]


def test_other_streams_and_flow_types_keep_their_messages(store: Store) -> None:
    (mine, theirs, other_type) = _append(store, ("Orders", "P", "f", 900), ("Orders", "Q", "f", 900),
                                         ("Refunds", "P", "x", 900))
    (new,) = _append(store, ("Orders", "P", "g", 200))
    assert _ids(store, "f") == [theirs]
    assert _ids(store, "g") == [new]
    assert _ids(store, "x") == [other_type]
    assert mine is not None


def test_a_message_as_large_as_the_capacity_leaves_room_for_nothing_else(store: Store) -> None:
    _append(store, ("Orders", "P", "f", 10), ("Orders", "P", "f", 20))
    (big,) = _append(store, ("Orders", "P", "f", 1000))
    assert _ids(store, "f") == [big]


def test_a_message_that_can_never_fit_is_refused_and_trims_nothing(store: Store) -> None:
    kept = _append(store, ("Orders", "P", "f", 600), ("Orders", "P", "f", 300))
    assert _append(store, ("Orders", "P", "f", 1001)) == [None]
    assert _ids(store, "f") == kept
    (more,) = _append(store, ("Orders", "P", "f", 100))  # the refused message did not count either
    assert _ids(store, "f") == [*kept, more]


# ---------------------------------------------------------------------------- reading ------
@pytest.fixture
def ten(store: Store) -> list[int]:
    """Ten messages of flow f alternating streams A and B, plus a message of flow g."""
    tokens = _append(store, *[("Orders", "AB"[i % 2], "f", 10) for i in range(10)], ("Orders", "A", "g", 10))
    assert None not in tokens
    return [t for t in tokens[:10] if t is not None]


def test_stream_messages_are_the_flows_oldest_first(store: Store, ten: list[int]) -> None:
    assert _ids(store, "f") == ten
    assert _ids(store, "f", "A") == ten[0::2]
    assert _ids(store, "f", "B") == ten[1::2]
    assert _ids(store, "f", "C") == []


def test_paging_forwards_with_after_id(store: Store, ten: list[int]) -> None:
    pages, after = [], 0
    while True:
        page = store.stream_messages("f", after_id=after, limit=4)
        if not page:
            break
        pages.append([m.id for m in page])
        after = page[-1].id
    assert pages == [ten[0:4], ten[4:8], ten[8:10]]


def test_paging_backwards_with_before_id_newest_first(store: Store, ten: list[int]) -> None:
    pages, before = [], None
    while True:
        page = store.stream_messages("f", limit=4, newest_first=True, before_id=before)
        if not page:
            break
        pages.append([m.id for m in page])
        before = page[-1].id
    assert pages == [ten[9:5:-1], ten[5:1:-1], ten[1::-1]]


def test_after_and_before_together_bound_a_window(store: Store, ten: list[int]) -> None:
    window = store.stream_messages("f", "A", after_id=ten[1], before_id=ten[8])
    assert [m.id for m in window] == [ten[2], ten[4], ten[6]]
    newest = store.stream_messages("f", "A", after_id=ten[1], before_id=ten[8], newest_first=True, limit=2)
    assert [m.id for m in newest] == [ten[6], ten[4]]
