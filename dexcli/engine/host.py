"""The engine's implementation of dexcli.host.Host: the store and the clock, with updates
from the loop group-committed."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from dexcli.engine.batch import GroupCommit, Unit
from dexcli.engine.clock import Clock
from dexcli.store import Store

# the flow whose attempt runs in this context: the host's clock is that flow's
current_flow: contextvars.ContextVar[str | None] = contextvars.ContextVar("dex_current_flow", default=None)


class StoreHost:
    def __init__(self, store: Store, clock: Clock, commits: GroupCommit | None = None,
                 flow_now: Callable[[str], float] | None = None) -> None:
        self.store = store
        self.clock = clock
        self._commits = commits or GroupCommit(store)
        self._flow_now = flow_now

    def now(self) -> float:
        """Inside an attempt, the time on its flow's clock; elsewhere this process's clock."""
        flow_id = current_flow.get()
        if flow_id is not None and self._flow_now is not None:
            return self._flow_now(flow_id)
        return self.clock.now()

    def kv_get(self, ns: str, key: str) -> Any:
        return self.store.kv_get(ns, key)

    def kv_put(self, ns: str, key: str, value: Any) -> None:
        self.store.kv_put(ns, key, value)

    def kv_update(self, ns: str, key: str, fn: Callable[[Any], Any]) -> Any:
        return self.store.kv_update(ns, key, fn)

    async def kv_update_async(self, ns: str, key: str, fn: Callable[[Any], Any]) -> Any:
        def apply(tx: Any) -> Any:
            new = fn(tx.kv_get(ns, key))
            tx.kv_put(ns, key, new)
            return new

        return await self._commits.submit(Unit(apply))
