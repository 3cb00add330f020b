"""The engine: runs flows durably — scheduling, attempts, limits, retries, recovery, clock.

Its one face is `Engine` (dexcli.engine.core): the CLI, Client/AsyncClient, Worker and
DexTestEnv build it with dexcli.builder and call only its verbs (start, drive, rpc, release,
the Attribute Stores to use, its activity (a read-only snapshot: dexcli.engine.activity), and
`change`: a stop, a skipped timer, a time travel, a FlowConfig update, a continue-as-new —
dexcli.engine.changes). The other modules here are its parts and read-only views.

`Engine` is imported on first use of the name, so that `import dexcli.engine.views` (a CLI
command that only reads) does not load the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dexcli.engine.activity import Activity, AttemptHere
    from dexcli.engine.changes import ContinueAsNew, SkipTimer, StopFlow, TimeSkip, TimeTravelRequest, UpdateFlowConfig
    from dexcli.engine.core import Drove, Engine

__all__ = ["Activity", "AttemptHere", "ContinueAsNew", "Drove", "Engine", "SkipTimer", "StopFlow", "TimeSkip",
           "TimeTravelRequest", "UpdateFlowConfig"]


def __getattr__(name: str) -> Any:
    if name in ("Drove", "Engine"):
        from dexcli.engine import core

        return getattr(core, name)
    if name in ("Activity", "AttemptHere"):
        from dexcli.engine import activity

        return getattr(activity, name)
    if name in __all__:
        from dexcli.engine import changes

        return getattr(changes, name)
    raise AttributeError(f"module 'dexcli.engine' has no attribute {name!r}")
