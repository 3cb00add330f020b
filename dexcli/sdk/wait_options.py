"""Options of the client's durable waits (Dex's names and defaults).

`request_timeout` bounds the whole call (zero waits indefinitely); dex has no Update handler to
roll over, so `internal_handler_timeout` is checked and otherwise has no effect, and
`request_id` names the wait only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dexcli.sdk.options import fits_seconds32


@dataclass(frozen=True)
class WaitForStepCompletionOptions:
    request_id: str = ""
    request_timeout: timedelta = timedelta(0)
    internal_handler_timeout: timedelta = timedelta(0)


@dataclass(frozen=True)
class WaitForAttributeOptions:
    request_id: str = ""
    request_timeout: timedelta = timedelta(0)
    internal_handler_timeout: timedelta = timedelta(0)


def duration_seconds(duration: timedelta) -> int:
    """Whole seconds within int32, as the official SDK requires of these durations."""
    seconds = duration.total_seconds()
    if not fits_seconds32(seconds):
        raise ValueError("duration must be whole seconds within int32")
    return int(seconds)
