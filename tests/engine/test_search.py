"""Client.search_flows over a real database: each index type, NOT/OR/IN, the built-in keys,
keyset paging (stable while flows are added), ORDER BY, and both ways a page is read (from a
selective comparison's index rows, or walking flows in StartTime order)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    Attribute,
    Client,
    Context,
    DexServiceError,
    Flow,
    FlowStatus,
    PersistenceSchema,
    SearchFlowsPage,
    Step,
    StepDecision,
    StepList,
    Value,
    WireKind,
    graceful_complete,
)
from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.sdk.attributes import AttributeIndex, IndexType
from dexcli.store import FlowState, Store
from dexcli.store import search as search_module

INDEXES = {
    "status": AttributeIndex(IndexType.KEYWORD, "OrderStatus"),
    "tags": AttributeIndex(IndexType.KEYWORD_ARRAY),
    "notes": AttributeIndex(IndexType.FULL_TEXT),
    "amount": AttributeIndex(IndexType.INT, "Amount"),
    "price": AttributeIndex(IndexType.DOUBLE),
    "vip": AttributeIndex(IndexType.BOOL),
    "due": AttributeIndex(IndexType.DATETIME),
}
# flow id -> (start time, attributes); o3 is closed
FLOWS: dict[str, tuple[float, dict[str, Any]]] = {
    "o1": (100.0, {"status": "paid", "tags": ["red", "big"], "notes": "Fragile: glass, handle with care",
                   "amount": 10, "price": 9.5, "vip": True, "due": "1970-01-02T00:00:00Z"}),
    "o2": (200.0, {"status": "new", "tags": ["blue"], "notes": "leave at the door", "amount": 25, "price": 20.0,
                   "vip": False, "due": "1970-01-03T00:00:00+00:00"}),
    "o3": (300.0, {"status": "paid", "tags": [], "notes": "glass", "amount": 40, "price": 0.5, "vip": False}),
    "o4": (400.0, {"amount": 5}),
}


def put(store: Store, flow_id: str, attrs: dict[str, Any], now: float = 0.0) -> None:
    with store.tx() as tx:
        writes = {name: AttributeWrite(name, name, None, json.dumps(v), INDEXES[name]) for name, v in attrs.items()}
        apply_writes(tx, flow_id, writes, now)


def add(store: Store, flow_id: str, start: float, attrs: dict[str, Any], flow_type: str = "Orders") -> None:
    with store.tx() as tx:
        tx.insert_flow_if_new(flow_id, f"run-{flow_id}", flow_type, None, "1", f"req-{flow_id}", start)
    put(store, flow_id, attrs, start)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    with Client(db=tmp_path / "dex.db") as c:
        for flow_id, (start, attrs) in FLOWS.items():
            add(c.store, flow_id, start, attrs)
        with c.store.tx() as tx:
            tx.close_flow("o3", FlowState.COMPLETED, 350.0, None, None)
        yield c


def ids(client: Client, query: str, page_size: int = 100) -> list[str]:
    return [e.flow_id for e in client.search_flows(query, page_size).flows]


@pytest.mark.parametrize(("query", "expected"), [
    ("OrderStatus = 'paid'", ["o3", "o1"]),
    ("OrderStatus != 'paid'", ["o2"]),  # has the key, another value (o4 has no OrderStatus)
    ("NOT OrderStatus = 'paid'", ["o4", "o2"]),
    ("OrderStatus > 'o'", ["o3", "o1"]),
    ("tags = 'big'", ["o1"]),  # any element of a keyword array
    ("tags != 'big'", ["o2"]),  # o3's array is empty: no value at all
    ("notes = 'glass'", ["o3", "o1"]),  # a word of a full-text value, any case
    ("notes = 'HANDLE with'", ["o1"]),
    ("notes = 'gla'", []),  # whole words only
    ("notes != 'glass'", ["o2"]),
    ("Amount = 25", ["o2"]), ("Amount != 25", ["o4", "o3", "o1"]), ("Amount < 10", ["o4"]),
    ("Amount <= 10", ["o4", "o1"]), ("Amount > 25", ["o3"]), ("Amount >= 25", ["o3", "o2"]),
    ("price > 9.5", ["o2"]), ("price >= 9.5", ["o2", "o1"]),
    ("vip = true", ["o1"]), ("vip = false", ["o3", "o2"]),
    ("due > '1970-01-02T12:00:00Z'", ["o2"]), ("due <= '1970-01-02'", ["o1"]),
    ("FlowStatus = 'Running'", ["o4", "o2", "o1"]), ("FlowStatus = 'COMPLETED'", ["o3"]),
    ("FlowId = 'o2'", ["o2"]), ("FlowType = 'Orders' AND Amount > 5", ["o3", "o2", "o1"]),
    ("StartTime >= 200 AND StartTime < '1970-01-01T00:06:40Z'", ["o3", "o2"]),
    ("CloseTime > 0", ["o3"]),
    ("OrderStatus = 'paid' AND FlowStatus = 'RUNNING'", ["o1"]),
    ("OrderStatus = 'new' OR Amount = 5", ["o4", "o2"]),
    ("(OrderStatus = 'new' OR Amount = 5) AND NOT Amount = 5", ["o2"]),
    ("OrderStatus IN ('new', 'paid') AND Amount IN (10, 25)", ["o2", "o1"]),
    ("", ["o4", "o3", "o2", "o1"]),
    # the keys and operators of the server's (Temporal's) visibility queries
    ("WorkflowId = 'o2'", ["o2"]), ("WorkflowId STARTS_WITH 'o'", ["o4", "o3", "o2", "o1"]),
    ("FlowId STARTS_WITH 'o2'", ["o2"]), ("FlowId STARTS_WITH ''", ["o4", "o3", "o2", "o1"]),
    ("ExecutionStatus = 'Running'", ["o4", "o2", "o1"]), ("ExecutionStatus = 'Completed'", ["o3"]),
    ("ExecutionStatus IN ('Completed', 'Failed')", ["o3"]), ("ExecutionStatus = 'TimedOut'", []),
    ("ExecutionStatus NOT IN ('Running', 'ContinuedAsNew')", ["o3"]),
    ("Amount BETWEEN 10 AND 25", ["o2", "o1"]), ("NOT Amount BETWEEN 10 AND 25", ["o4", "o3"]),
    ("Amount BETWEEN 10 AND 25 AND OrderStatus = 'new'", ["o2"]),
    ("StartTime BETWEEN 200 AND '1970-01-01T00:05:00Z'", ["o3", "o2"]),
    ("due BETWEEN '1970-01-02' AND '1970-01-02T12:00:00Z'", ["o1"]),
    ("FlowId BETWEEN 'o2' AND 'o3'", ["o3", "o2"]),
    ("OrderStatus STARTS_WITH 'pa'", ["o3", "o1"]), ("OrderStatus STARTS_WITH 'paid!'", []),
    ("tags STARTS_WITH 'bl'", ["o2"]),
    ("OrderStatus IS NULL", ["o4"]), ("OrderStatus IS NOT NULL", ["o3", "o2", "o1"]),
    ("tags IS NULL", ["o4", "o3"]),  # o3's array is empty: no value
    ("CloseTime IS NULL", ["o4", "o2", "o1"]), ("CloseTime IS NOT NULL", ["o3"]),
    ("Amount NOT IN (10, 25)", ["o4", "o3"]), ("OrderStatus NOT IN ('new')", ["o3", "o1"]),
    ("FlowId NOT IN ('o1', 'o2')", ["o4", "o3"]),
])
def test_queries(client: Client, query: str, expected: list[str]) -> None:
    assert ids(client, query) == expected


def test_both_ways_of_reading_a_page_agree(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = ["OrderStatus = 'paid'", "Amount > 5 AND OrderStatus != 'new'", "tags = 'big' OR Amount = 5"]
    selective = [ids(client, q) for q in queries]
    monkeypatch.setattr(search_module, "DENSE_MATCHES", 1)  # every comparison is "dense": walk in order
    assert [ids(client, q) for q in queries] == selective


def test_an_entry_carries_the_flow_and_its_indexed_attributes(client: Client) -> None:
    [entry] = client.search_flows("FlowId = 'o1'", 10).flows
    assert (entry.run_id, entry.flow_type, entry.status) == ("run-o1", "Orders", FlowStatus.RUNNING)
    assert entry.started_at == datetime.fromtimestamp(100.0, tz=UTC) and entry.closed_at is None
    attrs = entry.indexed_attributes
    assert attrs["OrderStatus"] == Value(WireKind.STRING, "paid")  # by index key
    assert attrs["Amount"] == Value(WireKind.INT64, 10)
    assert attrs["price"] == Value(WireKind.DOUBLE, 9.5)
    assert attrs["vip"] == Value(WireKind.BOOL, True)
    assert attrs["tags"] == Value(WireKind.JSON, '["red", "big"]')
    [closed] = client.search_flows("FlowId = 'o3'", 10).flows
    assert closed.status is FlowStatus.COMPLETED and closed.closed_at == datetime.fromtimestamp(350.0, tz=UTC)


def test_a_rewritten_value_leaves_the_old_one_unsearchable(client: Client) -> None:
    put(client.store, "o1", {"status": "shipped", "tags": None} | {})
    assert ids(client, "OrderStatus = 'paid'") == ["o3"]
    assert ids(client, "OrderStatus = 'shipped'") == ["o1"]


def test_paging_is_by_keyset_and_stable_while_flows_are_added(client: Client) -> None:
    pages: list[SearchFlowsPage] = [client.search_flows("", 3)]
    add(client.store, "o0", 50.0, {"amount": 1})  # older than every flow: lands on the last page
    add(client.store, "o9", 900.0, {"amount": 1})  # newer: not on a later page
    pages.append(client.search_flows("", 3, pages[0].next_page_token))
    assert [[e.flow_id for e in p.flows] for p in pages] == [["o4", "o3", "o2"], ["o1", "o0"]]
    assert pages[0].next_page_token and pages[1].next_page_token == ""


def test_order_by(client: Client) -> None:
    assert ids(client, "ORDER BY StartTime ASC") == ["o1", "o2", "o3", "o4"]
    assert ids(client, "ORDER BY Amount") == ["o4", "o1", "o2", "o3"]
    assert ids(client, "Amount > 0 ORDER BY Amount DESC") == ["o3", "o2", "o1", "o4"]
    assert ids(client, "ORDER BY OrderStatus") == ["o4", "o2", "o1", "o3"]  # o4 has none: lowest; ties by id
    assert ids(client, "ORDER BY CloseTime DESC") == ["o3", "o4", "o2", "o1"]  # running flows: no close time


def test_paging_through_an_order_by_on_an_index_key(client: Client) -> None:
    seen, token = [], ""
    while True:
        page = client.search_flows("ORDER BY Amount DESC", 1, token)
        seen += [e.flow_id for e in page.flows]
        token = page.next_page_token
        if not token:
            break
    assert seen == ["o3", "o2", "o1", "o4"]


class Only(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Orders(Flow[int]):
    """Declares the index key OrderStatus."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Only())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(Attribute("status", str, index=INDEXES["status"]))


def test_a_key_no_flow_has_and_no_registered_flow_declares_is_an_error(tmp_path: Path) -> None:
    """The server refuses a search attribute it does not have; an unknown key never silently
    matches nothing. A key a registered flow declares, which no flow holds yet, matches nothing."""
    with Client(db=tmp_path / "dex.db") as bare:
        add(bare.store, "o1", 100.0, {"amount": 10})
        with pytest.raises(DexServiceError, match="there is no search key 'OrderStatus'; the keys are: FlowId, "
                                                  "RunId, FlowType, FlowStatus, StartTime, CloseTime, WorkflowId, "
                                                  "ExecutionStatus, ActiveStepTypes, Amount"):
            bare.search_flows("OrderStatus = 'paid'", 10)
        with pytest.raises(DexServiceError, match="no search key 'Nobody'"):
            bare.search_flows("Amount > 1 ORDER BY Nobody", 10)
    with Client([Orders()], db=tmp_path / "dex.db") as registered:
        assert ids(registered, "OrderStatus = 'paid'") == []
        assert ids(registered, "OrderStatus IS NULL") == ["o1"]


@pytest.mark.parametrize(("query", "said"), [
    ("FlowStatus BETWEEN 'a' AND 'b'", "FlowStatus takes =, !=, IN or NOT IN only, not BETWEEN"),
    ("ExecutionStatus = 'Sleeping'", "ExecutionStatus is one of RUNNING"),
    ("StartTime STARTS_WITH '1970'", "STARTS_WITH takes a text key, and StartTime is a time"),
    ("notes STARTS_WITH 'gl'", "STARTS_WITH takes a KEYWORD or KEYWORD_ARRAY key; notes is FULL_TEXT"),
    ("due STARTS_WITH '1970'", "STARTS_WITH takes a KEYWORD or KEYWORD_ARRAY key; due is DATETIME"),
    ("vip BETWEEN false AND true", "vip is a BOOL key: it takes = or != only, not BETWEEN"),
    ("Amount BETWEEN 1 OR 2", "expected AND between the two values of BETWEEN at column 18"),
    ("Amount IS 5", "expected NULL at column 11"),
    ("Amount NOT = 5", "expected IN after NOT at column 12"),
])
def test_the_new_operators_refuse_what_they_cannot_compare(client: Client, query: str, said: str) -> None:
    with pytest.raises(DexServiceError, match=re.escape(said)):
        client.search_flows(query, 10)


def test_bad_queries_tokens_and_sizes(client: Client) -> None:
    with pytest.raises(DexServiceError, match="expected a value at column 15"):
        client.search_flows("OrderStatus = AND x", 10)
    token = client.search_flows("", 1).next_page_token
    with pytest.raises(DexServiceError, match="another ORDER BY"):
        client.search_flows("ORDER BY Amount", 1, token)
    with pytest.raises(DexServiceError, match="page token"):
        client.search_flows("", 1, "not-a-token")
    with pytest.raises(ValueError, match="negative"):
        client.search_flows("", -1)
    assert len(client.search_flows("", 0).flows) == 4  # 0: the default size
