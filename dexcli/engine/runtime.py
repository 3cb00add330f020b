"""The runtime a running step can reach without globals: the engine's store and clock.

The engine sets it in a context variable before it starts attempts; tasks and handler threads
inherit it. Example services (the polling flow's simulated job API) use it so their state
lives in the same database and moves with the same clock.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from dexcli.engine.clock import Clock


@dataclass(frozen=True)
class Runtime:
    store: Any
    clock: Clock


_current: contextvars.ContextVar[Runtime] = contextvars.ContextVar("dex_runtime")


def current_runtime() -> Runtime:
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("no dex engine is running in this context") from None


def set_runtime(rt: Runtime) -> contextvars.Token[Runtime]:
    return _current.set(rt)


def reset_runtime(token: contextvars.Token[Runtime]) -> None:
    _current.reset(token)
