"""What `search_flows` returns: a page of flow runs with their indexed attributes (Dex's names)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from dexcli.sdk.codec import Value, WireKind
from dexcli.sdk.results import FlowStatus


@dataclass(frozen=True)
class SearchFlowEntry:
    """One flow run a search matched; `indexed_attributes` by index key."""

    flow_id: str
    run_id: str
    flow_type: str
    status: FlowStatus
    started_at: datetime
    closed_at: datetime | None
    indexed_attributes: Mapping[str, Value]


@dataclass(frozen=True)
class SearchFlowsPage:
    """One page of results in the query's order; `next_page_token` is "" on the last page."""

    flows: Sequence[SearchFlowEntry]
    next_page_token: str


def stored_value(text: str) -> Value:
    """An attribute's stored JSON as the Value the official client hands out for it."""
    data = json.loads(text)
    if isinstance(data, bool):
        return Value(WireKind.BOOL, data)
    if isinstance(data, int):
        return Value(WireKind.INT64, data)
    if isinstance(data, float):
        return Value(WireKind.DOUBLE, data)
    if isinstance(data, str):
        return Value(WireKind.STRING, data)
    return Value(WireKind.JSON, text)
