"""What the engine reports as it goes: the CLI's live view, `--json` lines, test harnesses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dexcli.engine.deadlines import iso


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
    """Calls each listener with each event, in order, on the engine's thread."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.listeners: list[Listener] = []

    def emit(self, type_: str, flow_id: str, **data: Any) -> None:
        if not self.listeners:
            return
        ev = Event(type_, flow_id, self._now(), data)
        for fn in list(self.listeners):
            fn(ev)
