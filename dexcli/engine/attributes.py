"""What a handler sees of its flow's attributes, and how their writes are applied.

`AttributeView` is one handler call's view: the snapshot read when it started (plain
attributes, and the map instances it loads) plus its own staged writes, which it reads back.
`apply_writes` commits staged writes in the handler's result transaction and keeps the search
index of indexed attributes in step (and marks the Attribute Store projections of synced ones:
engine/attribute_sync.py writes them out after the commit), and first what they overwrite for the step executions in
a method call (their retries read the attributes as the call began: `Tx.keep_call_snapshots`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from dexcli.engine.handler_state import declared
from dexcli.sdk.attributes import Attribute, AttributeMap, IndexType, index_key
from dexcli.sdk.channels import physical_name
from dexcli.sdk.codec import decode, encode, from_jsonable, to_jsonable
from dexcli.sdk.errors import AttributeMapNotLoadedError, FlowCodeError, ValueMappingError
from dexcli.sdk.registry import FlowDefinition
from dexcli.store import Tx


@dataclass(frozen=True, slots=True)
class AttributeWrite:
    key: str
    name: str
    instance: str | None
    value: str | None  # JSON; None deletes
    index: Any  # the definition's AttributeIndex, or None
    sync: bool = False  # the definition's sync_to_attribute_store: projected to the flow's Attribute Store
    hard: bool = False  # the definition's hard_delete_on_null: never in history, gone for good once deleted


def zero_value(value_type: Any) -> Any:
    return {bool: False, int: 0, float: 0.0}.get(value_type)


class AttributeView:
    def __init__(self, definition: FlowDefinition, snapshot: dict[str, str], loads: tuple[str, ...]) -> None:
        self.definition = definition
        self.snapshot = snapshot
        self.loads = loads
        self.writes: dict[str, AttributeWrite] = {}

    def declared(self, attribute: Any) -> Any:
        return declared(self.definition.attributes, attribute, self.definition.flow_type, "attribute")

    def _check_loaded(self, name: str, key: str) -> None:
        if f"{name}/" not in self.loads and key not in self.loads:
            raise AttributeMapNotLoadedError(f"AttributeMap instance was not loaded for this invocation: {key}")

    def get(self, attribute: Any, instance: str | None) -> Any:
        declared = self.declared(attribute)
        key = physical_name(declared.name, instance)
        if isinstance(declared, AttributeMap):
            self._check_loaded(declared.name, key)
        write = self.writes.get(key)
        text = write.value if write is not None else self.snapshot.get(key)
        return zero_value(declared.value_type) if text is None else decode(text, declared.value_type)

    def set(self, attribute: Any, instance: str | None, value: Any) -> None:
        declared = self.declared(attribute)
        if value is None:
            self.delete(attribute, instance)
            return
        text = encode(from_jsonable(to_jsonable(value), declared.value_type))
        if declared.hard_delete_on_null and isinstance(json.loads(text), (bool, int, float)):
            raise ValueMappingError(f"hard-delete Attribute {declared.name} supports only string and object values, "
                                    f"not {type(json.loads(text)).__name__}")
        key = physical_name(declared.name, instance)
        self.writes[key] = AttributeWrite(key, declared.name, instance, text, declared.index,
                                          declared.sync_to_attribute_store, declared.hard_delete_on_null)

    def delete(self, attribute: Any, instance: str | None) -> None:
        declared = self.declared(attribute)
        key = physical_name(declared.name, instance)
        self.writes[key] = AttributeWrite(key, declared.name, instance, None, declared.index,
                                          declared.sync_to_attribute_store, declared.hard_delete_on_null)

    def map_keys(self, attribute: Any) -> list[str]:
        declared = self.declared(attribute)
        if f"{declared.name}/" not in self.loads:
            raise AttributeMapNotLoadedError(
                f"all AttributeMap instances were not loaded for this invocation: {declared.name}")
        prefix = declared.name + "/"
        keys = {k for k in self.snapshot if k.startswith(prefix)}
        for k, w in self.writes.items():
            if k.startswith(prefix):
                (keys.discard if w.value is None else keys.add)(k)
        return sorted(unquote(k[len(prefix):]) for k in keys)


def initial_attributes(definition: FlowDefinition, options: Any) -> dict[str, AttributeWrite]:
    """StartFlowOptions.with_attribute values, checked against the flow and encoded."""
    view = AttributeView(definition, {}, ())
    for attribute, instance, value in options.attribute_initializations:
        try:
            view.set(attribute, instance, value)
        except FlowCodeError as exc:
            raise ValueMappingError(f"with_attribute: {exc}") from None
    return view.writes


# ------------------------------------------------------------------------------ commit ------
def apply_writes(tx: Tx, flow_id: str, writes: dict[str, AttributeWrite], now: float,
                 writer: str | None = None) -> dict[str, Any]:
    """Commit staged writes (and their index rows) of `writer` (a step execution, or None);
    returns {key: value or None} for history. A hard-delete attribute's value is never kept
    anywhere else: not in history, not in the snapshots of method calls (a retry reads it as it
    is now, so a delete is final), and its delete removes its only copy."""
    upserts: dict[str, Any] = {}
    tx.keep_call_snapshots(flow_id, [k for k, w in writes.items() if not w.hard], writer)
    for w in writes.values():
        if w.value is None:
            tx.delete_attribute(flow_id, w.key)
        else:
            tx.put_attribute(flow_id, w.key, w.name, w.instance, w.value, now)
        if w.index is not None:
            value = None if w.value is None else json.loads(w.value)
            tx.set_search(flow_id, w.key, index_key(w.index, w.name), w.index.type.value,
                          index_values(w.index.type, value))
        if w.sync:  # its projection, in this transaction: not lost if the process dies after it
            tx.mark_attribute_sync(flow_id, w.key, w.value, now)
        if not w.hard:
            upserts[w.key] = None if w.value is None else json.loads(w.value)
    return upserts


def index_values(kind: IndexType, value: Any) -> list[tuple[str | None, float | None]]:
    """The index rows of one value: (text, num) pairs."""
    if value is None:
        return []
    if kind in (IndexType.KEYWORD, IndexType.FULL_TEXT):
        return [(str(value), None)]
    if kind is IndexType.KEYWORD_ARRAY:
        return [(str(v), None) for v in value]
    if kind is IndexType.BOOL:
        return [(None, 1.0 if value else 0.0)]
    if kind is IndexType.DATETIME:
        when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return [(None, when.timestamp())]
    return [(None, float(value))]


def definitions_of(schema_items: tuple[Any, ...]) -> dict[str, Any]:
    return {a.name: a for a in schema_items if isinstance(a, (Attribute, AttributeMap))}
