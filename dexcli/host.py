"""The host: what dex offers a flow package beyond the Dex SDK, for local simulations.

A flow package may keep small state of its own in the dex database and read the engine's
clock, so that every process sharing the database sees the same state and virtual time or
`dex time skip` moves it too (the polling example's simulated job API does both). Code that
runs inside a step gets the host of the engine running it from `current_host()`; code that
runs outside one (a CLI command of the package) is handed a host by the CLI. A flow that
uses the host does not run on a Dex server as it is: keep it to examples and simulations.

This module defines the interface only; the engine implements it (dexcli.engine.host).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Protocol


class Host(Protocol):
    def now(self) -> float:
        """The engine's clock: epoch seconds, virtual or skipped time included."""

    def kv_get(self, ns: str, key: str) -> Any:
        """A JSON value stored under (ns, key), or None."""

    def kv_put(self, ns: str, key: str, value: Any) -> None:
        """Store a JSON value (committed before it returns)."""

    def kv_update(self, ns: str, key: str, fn: Callable[[Any], Any]) -> Any:
        """Read-modify-write one value atomically; `fn` may raise to abort. Returns the new value."""

    async def kv_update_async(self, ns: str, key: str, fn: Callable[[Any], Any]) -> Any:
        """`kv_update` from code on the engine's loop: updates made in the same loop pass share
        one commit. Returns once committed."""


_current: contextvars.ContextVar[Host] = contextvars.ContextVar("dex_host")


def current_host() -> Host:
    """The host of the engine running the calling step."""
    try:
        return _current.get()
    except LookupError:
        raise RuntimeError("no dex engine is running in this context") from None


def use_host(host: Host) -> contextvars.Token[Host]:
    """Make `host` current in this context (the engine does, before it starts attempts)."""
    return _current.set(host)


def reset_host(token: contextvars.Token[Host]) -> None:
    _current.reset(token)
