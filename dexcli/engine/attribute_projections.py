"""Read-only: how each synced attribute of a flow stands in its Attribute Stores (from the
outbox, store/attribute_outbox.py), for inspect. Kept apart from engine/attribute_sync.py, which
writes, so that views load nothing that runs flows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dexcli.store import Store
from dexcli.store.attribute_outbox import of_flow


@dataclass(frozen=True)
class Projection:
    """How a flow's synced attribute stands (for inspect): `status` PENDING (not written yet:
    `error` says what failed, `attempts` how often), SYNCED (its latest value is in `stores`;
    none when the flow's FlowConfig names no store), SKIPPED (a store cannot take it: `error`)
    or FAILED (given up after about an hour of failed writes, its value kept: `error`)."""

    key: str
    status: str
    stores: tuple[str, ...]
    attempts: int
    error: str | None

    @property
    def pending(self) -> bool:
        return self.status == "PENDING"

    @property
    def skipped(self) -> bool:
        return self.status == "SKIPPED"

    @property
    def failed(self) -> bool:
        return self.status == "FAILED"

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "status": self.status, "stores": list(self.stores), "attempts": self.attempts,
                "error": self.error}


def projections(store: Store, flow_id: str) -> list[Projection]:
    """Each synced attribute key of a flow: where its latest value went, or why not yet."""
    return [Projection(r.key, r.status, tuple(json.loads(r.stores)) if r.stores else (), r.attempts, r.error)
            for r in store.read(lambda tx: of_flow(tx.c, flow_id))]
