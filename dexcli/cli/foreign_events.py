"""`--json` events for what other processes did to the flow this process drives: an RPC
(`dex rpc`), a skipped timer (`dex skip-timer`), and the wait they made ready. This process's
engine reports only its own changes; these are read from the flow's history instead.

A wait made ready here is reported by the engine (`waitCompleted`); one made ready by another
process's RPC or timer skip is reported from history: its StepWaitForCompleted follows that
RpcExecutionCompleted or TimerSkipped in the same transaction (same time, next event ids).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from dexcli.engine.views import history_event
from dexcli.store import Store

POLL_SECONDS = 0.25


class ForeignEvents:
    """Follows one flow's history on its own thread and connection; prints what others did."""

    def __init__(self, db: str, flow_id: str, write: Callable[[dict[str, Any]], None]) -> None:
        self._store = Store(db, read_only=True)
        self._flow_id = flow_id
        self._write = write
        self._after = max((e.event_id for e in self._store.history_of(flow_id)), default=0)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.poll()
        self._store.close()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception:  # a view must never take the engine down
                return

    def poll(self) -> None:
        with self._lock:
            cause: str | None = None  # the time of the other process's change being followed
            for e in self._store.history_of(self._flow_id, self._after):
                self._after = e.event_id
                ev = history_event(e)
                if e.type in ("RpcExecutionCompleted", "TimerSkipped"):
                    cause = ev["eventTime"]
                    self._emit(ev)
                elif e.type == "StepWaitForCompleted" and cause == ev["eventTime"]:
                    self._emit(ev)
                else:
                    cause = None

    def _emit(self, ev: dict[str, Any]) -> None:
        kind = {"RpcExecutionCompleted": "rpcCompleted", "TimerSkipped": "timerSkipped",
                "StepWaitForCompleted": "waitCompleted"}[ev["type"]]
        out: dict[str, Any] = {"type": kind, "flowId": self._flow_id, "time": ev["eventTime"], "byAnotherProcess": True}
        if kind == "waitCompleted":
            out.update(stepExecutionId=ev["stepExecutionId"], conditionResults=ev["conditionResults"])
        else:
            out.update({k: v for k, v in ev.items() if k not in ("type", "eventId", "eventTime")})
        self._write(out)


def print_json(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")  # one write: lines of two threads never interleave
    sys.stdout.flush()
