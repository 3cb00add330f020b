"""The Attribute Store: synced attributes projected, after their commit, into the stores dex.toml
names ([attribute_store]), as a Dex server projects them (its attribute synchronizer).

A write of an attribute declared `sync_to_attribute_store=True` marks its projection in the dex
database in the transaction of the write (`store/attribute_outbox.py`); `AttributeSync` writes
the marked projections to the stores once that transaction has committed (the store tells it:
`Store.on_attribute_sync`), and again when an engine starts (what a process that died left).
A drain first claims its rows in a durable transaction, which also commits what ASYNC
durability left open: no store is written a value the dex database could still lose.
So, as on Dex, a projection never rolls back or delays the attribute's write, a failed one is
retried (100 ms backoff, doubling, at most 30 s apart) and given up after about an hour of
retries (`GIVE_UP_ATTEMPTS` failed writes), and the store holds each key's latest value. A
store that fails is tried once per drain: the other projections routed to it wait for their
next retry, so a store that is down (a connect that times out) costs one try, not one per flow.
Unlike Dex, none is lost: a projection given up is FAILED with its value kept (`dex inspect`
and `dex doctor` name it), and the next process that opens the stores (`open`) makes it due
again, as does the next write of the attribute; none is lost when a process dies either: the
next process that drains writes it.

Which stores: `route` — the flow's FlowConfig `attribute_store_names` when it sets them ([]
projects to none), else dex.toml's default store. A flow's names are read when its projections
are written (`names_of`), so a FlowConfig change applies to projections not yet written.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dexcli.engine.attribute_projections import Projection, projections
from dexcli.engine.transitions import attribute_sync as t
from dexcli.sdk.errors import DexServiceError
from dexcli.store import Store
from dexcli.store.attribute_outbox import SyncRow, any_failed, next_due
from dexcli.store.attribute_targets import AttributeStoreError, StoreSettings, Target, open_target

BACKOFF_FIRST, BACKOFF_MAX = 0.1, 30.0  # Dex's syncRetryPolicy defaults
GIVE_UP_SECONDS = 3600.0  # ... and its expiration: about an hour of retries
LEASE_SECONDS = 60.0  # a claim no drain finishes in this long may be taken over


class UnknownAttributeStoreError(DexServiceError):
    """A FlowConfig names an Attribute Store dex.toml does not define (the server's
    "unknown Attribute Store")."""

    exit_code = 2


@dataclass(frozen=True)
class AttributeStores:
    """dex.toml's [attribute_store]: the stores by name, and the one a flow whose FlowConfig
    names none projects to (None: such flows project nowhere until one is set)."""

    stores: Mapping[str, StoreSettings] = field(default_factory=dict)
    default: str | None = None


def route(names: Sequence[str] | None, config: AttributeStores) -> tuple[str, ...]:
    """The stores a flow's synced attributes project to: its FlowConfig's
    `attribute_store_names` (None: not set, dex.toml's default store; []: none)."""
    if names is None:
        return (config.default,) if config.default else ()
    check_names(names, config)
    return tuple(dict.fromkeys(names))


def check_names(names: Sequence[str], config: AttributeStores) -> None:
    """Refuse a FlowConfig that names a store dex.toml does not define (call it where a
    FlowConfig is accepted: a start's config_override, update_flow_config)."""
    for name in names:
        if name not in config.stores:
            known = ", ".join(sorted(config.stores)) or "none: dex.toml has no [attribute_store.stores]"
            raise UnknownAttributeStoreError(f"unknown Attribute Store {name!r} (known: {known})")


class AttributeSync:
    """Writes the outbox's projections to their stores. One per engine that has stores
    configured; its targets are opened once (`open`: every store reachable, or an
    AttributeStoreError naming the first that is not)."""

    def __init__(self, store: Store, config: AttributeStores, now: Callable[[], float],
                 names_of: Callable[[str], Sequence[str] | None] | None = None,
                 report: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.config = config
        self.now = now  # the engine's clock (real(): the time every process shares)
        self.names_of = names_of or (lambda _flow_id: None)  # the flow's FlowConfig attribute_store_names
        self.report = report or (lambda _line: None)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:sync-{uuid.uuid4().hex[:6]}"
        self.targets: dict[str, Target] = {}
        self._lock = threading.Lock()
        self._again = False
        self._timer: asyncio.TimerHandle | None = None
        self._scheduled: asyncio.AbstractEventLoop | None = None
        self.written = 0  # projections written (each key to all its stores), for tests and bench

    def open(self) -> None:
        """Open every store (an AttributeStoreError naming the first that cannot be); then the
        projections an earlier process gave up are due again (`transitions.attribute_sync.requeue`)."""
        try:
            for name, settings in self.config.stores.items():
                if name not in self.targets:
                    self.targets[name] = open_target(settings)
        except AttributeStoreError:
            self.close()
            raise
        if not self.store.read(lambda tx: any_failed(tx.c)):  # (no write transaction for nothing)
            return
        with self.store.tx() as tx:
            again = t.requeue(tx)
        if again:
            self.report(f"Attribute Store: {again} projection(s) given up earlier are retried now that the "
                        "stores are open")

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for target in self.targets.values():
            target.close()
        self.targets.clear()

    # ------------------------------------------------------------------ when -------------
    def kick(self) -> None:
        """Projections were committed (or may be left from a process that died): write them.
        On an event loop, soon on that loop; elsewhere (a client call with no engine running)
        here and now."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.drain()
            return
        if self._scheduled is not loop:
            self._scheduled = loop
            loop.call_soon(self._drain_on_loop, loop)
            teardown = getattr(loop, "teardown", None)  # a ClockEventLoop's: its drive ends
            if teardown is not None and self._last_drain not in teardown:
                teardown.append(self._last_drain)

    def _last_drain(self) -> None:
        """The loop is torn down (its drive ended): what it had still to write is written now."""
        if self._scheduled is not None:
            self._scheduled = None
            self.drain()

    def _drain_on_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = None
        due = self.drain()
        if due is not None and not loop.is_closed():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_later(max(0.0, due - self.now()), self._drain_on_loop, loop)

    # ------------------------------------------------------------------ what -------------
    def drain(self) -> float | None:
        """Write every projection due now; returns when the next one (a retry) is due. A drain
        asked for while another runs (another thread) makes that one go round again."""
        while True:
            if not self._lock.acquire(blocking=False):
                self._again = True
                return None
            try:
                self._again = False
                while True:
                    now = self.now()
                    with self.store.tx() as tx:
                        rows = t.claim(tx, self.owner, now, LEASE_SECONDS)
                    if not rows:
                        break
                    self._write(rows, now)
                due = self.store.read(lambda tx: next_due(tx.c))
            finally:
                self._lock.release()
            if not self._again:  # asked again after this one's last claim: go round once more
                return due

    def _write(self, rows: list[SyncRow], now: float) -> None:
        by_flow: dict[str, list[SyncRow]] = {}
        for r in rows:
            by_flow.setdefault(r.flow_id, []).append(r)
        done: list[t.Settled] = []
        down: dict[str, str] = {}  # store -> its failure in this drain: not tried again in it
        for flow_id, items in by_flow.items():
            done += self._write_flow(flow_id, items, now, down)
        with self.store.tx() as tx:
            t.settle(tx, done)
        self.written += sum(1 for s in done if s.kind == "delivered")

    def _write_flow(self, flow_id: str, items: list[SyncRow], now: float, down: dict[str, str]
                    ) -> list[t.Settled]:
        try:
            stores = route(self.names_of(flow_id), self.config)
        except UnknownAttributeStoreError as exc:
            return [self._failed(flow_id, r, str(exc), now + BACKOFF_MAX) for r in items]
        if not stores:
            if self.names_of(flow_id) is not None:  # its FlowConfig names none: projections are off
                return [t.Settled(r, "drop") for r in items]
            return [self._failed(flow_id, r, "no Attribute Store: dex.toml names no default store "
                                             "([attribute_store] default)", now + BACKOFF_MAX) for r in items]
        values = {r.key: None if r.value is None else json.loads(r.value) for r in items}
        skipped: dict[str, list[str]] = {}
        for name in stores:
            if name in down:  # failed in this drain already: wait for the retry
                return [self._failed(flow_id, r, down[name], now + backoff(r.attempts)) for r in items]
            target = self.targets.get(name)
            try:
                if target is None:
                    raise AttributeStoreError(f"Attribute Store {name!r} is not open in this process")
                for s in target.upsert(flow_id, values):
                    skipped.setdefault(s.key, []).append(f"{name}: {s.reason}")
            except AttributeStoreError as exc:
                down[name] = str(exc)
                self.report(f"{exc}; retrying")
                return [self._failed(flow_id, r, str(exc), now + backoff(r.attempts)) for r in items]
        out = []
        for r in items:
            if r.key in skipped:
                reason = "; ".join(skipped[r.key])
                self.report(f"Attribute Store: flow {flow_id!r} {r.key!r} skipped ({reason})")
                out.append(t.Settled(r, "skip", reason, stores=stores))
            else:
                out.append(t.Settled(r, "delivered", stores=stores))
        return out

    def _failed(self, flow_id: str, r: SyncRow, error: str, next_at: float) -> t.Settled:
        """A write of `r` failed: retried at `next_at`, or given up once it has failed for about
        an hour (GIVE_UP_ATTEMPTS), its value kept."""
        if r.attempts + 1 < GIVE_UP_ATTEMPTS:
            return t.Settled(r, "retry", error, next_at)
        why = (f"given up after {r.attempts + 1} failed attempts (about an hour): {error}; kept: retried when a "
               "dex process next opens the stores, or when the attribute is written again")
        self.report(f"Attribute Store: flow {flow_id!r} {r.key!r} {why}")
        return t.Settled(r, "fail", why)

    # ------------------------------------------------------------------ views ------------
    def projections(self, flow_id: str) -> list[Projection]:
        return projections(self.store, flow_id)


def backoff(attempts: int) -> float:
    return float(min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(attempts, 20)))


def _give_up_attempts() -> int:
    """The failed writes whose backoffs add up to GIVE_UP_SECONDS (128: about an hour)."""
    n, waited = 0, 0.0
    while waited < GIVE_UP_SECONDS:
        waited += backoff(n)
        n += 1
    return n


GIVE_UP_ATTEMPTS = _give_up_attempts()
