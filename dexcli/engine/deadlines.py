"""Pure helpers about time and leases, shared by the engine and the read-only views
(`dex list`, `dex inspect`), which should not load the engine or asyncio to format a time."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dexcli.sdk.options import ResolvedOptions


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


TIMEOUT_ORDER = ("StartToClose", "Heartbeat", "ScheduleToClose")


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process holding a lease still runs (None when it cannot be told: other host)."""
    if not owner:
        return None
    host, _, rest = owner.partition(":")
    pid_s = rest.partition(":")[0]
    import socket  # only for a lease's owner, not on every import

    if host != socket.gethostname() or not pid_s.isdigit():
        return None
    try:
        os.kill(int(pid_s), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def timeout_detail(kind: str, opts: ResolvedOptions) -> str:
    if kind == "StartToClose":
        return f"ExecuteMethodTimeout of {opts.method_timeout:g} s expired"
    if kind == "Heartbeat":
        return f"no heartbeat or Stream message within HeartbeatTimeout of {opts.heartbeat_timeout:g} s"
    return f"TotalDuration of {opts.total_duration:g} s expired"


TIE_SECONDS = 1.0  # Dex limits have whole-second precision


def earliest_deadline(attempt_deadline: float, heartbeat_deadline: float,
                      total_deadline: float) -> tuple[float, str]:
    """The first limit to expire, and its kind.

    Deadlines less than a second apart count as a tie, won by StartToClose, then Heartbeat:
    when ExecuteMethodTimeout equals TotalDuration (the seed's MAX_JOB_WAIT), the total
    deadline, set when the step was scheduled, falls a few milliseconds before the attempt's,
    and Dex reports the attempt timeout.
    """
    cands = [(attempt_deadline, 0), (heartbeat_deadline, 1), (total_deadline, 2)]
    t = min(c[0] for c in cands)
    kind = min(i for d, i in cands if d - t < TIE_SECONDS)
    return t, TIMEOUT_ORDER[kind]
