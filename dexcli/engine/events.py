"""What the engine reports as it goes: the CLI's live view, `--json` lines, test harnesses."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dexcli.engine.deadlines import iso

log = logging.getLogger("dexcli.engine")


@dataclass(frozen=True)
class Event:
    type: str
    flow_id: str
    time: float
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "flowId": self.flow_id, "time": iso(self.time), **self.data}


Listener = Callable[[Event], None]


class Emitter:
    """Calls each listener with each event, in order, one event at a time: on the engine's
    loop, or on the handler thread that runs a chain of sync steps (dexcli.engine.sync_attempt).

    A listener that raises is removed and its error handed to `on_listener_error` (by default
    logged): a broken view or a closed pipe never stops the engine or loses a commit.
    """

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.listeners: list[Listener] = []
        self.on_listener_error: Callable[[Listener, Exception], None] = _log_error
        self._lock = threading.RLock()

    def emit(self, type_: str, flow_id: str, **data: Any) -> None:
        if not self.listeners:
            return
        with self._lock:
            self._emit(Event(type_, flow_id, self._now(), data))

    def _emit(self, ev: Event) -> None:
        for fn in list(self.listeners):
            try:
                fn(ev)
            except Exception as exc:
                if fn in self.listeners:
                    self.listeners.remove(fn)
                self.on_listener_error(fn, exc)


def _log_error(listener: Listener, exc: Exception) -> None:
    log.error("an event listener failed and was removed: %s", exc, exc_info=exc)
