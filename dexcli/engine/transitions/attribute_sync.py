"""The Attribute Store outbox's state changes: a drain claims the projections due, then settles
each one it wrote (or could not). The marking itself is part of an attribute's write
(`engine.attributes.apply_writes`, in that write's transaction)."""

from __future__ import annotations

from dataclasses import dataclass

from dexcli.store import Tx
from dexcli.store import attribute_outbox as outbox
from dexcli.store.attribute_outbox import SyncRow


@dataclass(frozen=True)
class Settled:
    """What became of one claimed projection: `delivered` (every store has it), `retry` (at
    `next_at`, after `error`), `fail` (retried too long: given up, `error` says why), `skip` (a
    store cannot take the value: `error` says why) or `drop` (the flow projects to no store)."""

    row: SyncRow
    kind: str
    error: str | None = None
    next_at: float = 0.0
    stores: tuple[str, ...] = ()  # those written to (delivered, skip)


def claim(tx: Tx, owner: str, now: float, lease: float) -> list[SyncRow]:
    """The projections due now that no live process is writing, claimed for `owner`."""
    return outbox.claim(tx.c, owner, now, lease)


def settle(tx: Tx, results: list[Settled]) -> None:
    for s in results:
        if s.kind in ("delivered", "drop"):
            outbox.delivered(tx.c, s.row, list(s.stores))
        elif s.kind == "skip":
            outbox.skip(tx.c, s.row, s.error or "", list(s.stores))
        elif s.kind == "fail":
            outbox.give_up(tx.c, s.row, s.error or "")
        else:
            outbox.retry(tx.c, s.row, s.next_at, s.error or "")


def requeue(tx: Tx) -> int:
    """The projections given up (FAILED) due again, from their first attempt: the stores opened."""
    return outbox.requeue_failed(tx.c)
