"""Pure helpers about time and leases, shared by the engine and the read-only views
(`dex list`, `dex inspect`), which should not load the engine or asyncio to format a time."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

from dexcli.sdk.options import ResolvedOptions
from dexcli.store import Method, StepRecord

_YEAR_10000 = 253_402_300_800  # epoch seconds of 10000-01-01: below it strftime's %Y has four digits
_second: list[tuple[int, str]] = [(-1, "")]  # the last whole second formatted, and its text


def iso(t: float | None) -> str | None:
    """`datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")` with a Z, the same
    text to the character (microseconds rounded half to even, then cut to milliseconds), at a
    third of its cost: a transition formats a few, and consecutive ones share their second."""
    if t is None:
        return None
    frac, whole = math.modf(t)
    us, sec = round(frac * 1e6), int(whole)
    if us >= 1_000_000:
        sec, us = sec + 1, us - 1_000_000
    elif us < 0:
        sec, us = sec - 1, us + 1_000_000
    if not 0 <= sec < _YEAR_10000:
        return datetime.fromtimestamp(t, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    last = _second[0]
    if last[0] != sec:
        last = (sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)))
        _second[0] = last
    return f"{last[1]}.{us // 1000:03d}Z"


TIMEOUT_ORDER = ("StartToClose", "Heartbeat", "ScheduleToClose")


def method_options(step: StepRecord) -> ResolvedOptions:
    """The limits of the method the step's attempts run now (wait_for's, or execute's)."""
    if step.method is Method.WAIT_FOR and step.wait_options is not None:
        return ResolvedOptions.from_json(step.wait_options)
    return ResolvedOptions.from_json(step.options)


def total_left(step: StepRecord, now: float) -> float:
    """Seconds of TotalDuration left to a step's method. A method that takes locks and has not
    begun has all of it: its TotalDuration counts from when it gets them."""
    if step.attempt == step.method_base:
        opts = method_options(step)
        if opts.locks:
            return opts.total_duration
    return step.total_deadline - now


def timeout_detail(kind: str, opts: ResolvedOptions) -> str:
    """dex's account of a timeout, with the limit that expired: what `dex inspect` and the live
    view show for the attempt (client code gets `server_timeout_detail`)."""
    if kind == "StartToClose":
        return f"ExecuteMethodTimeout of {opts.method_timeout:g} s expired"
    if kind == "Heartbeat":
        return f"no heartbeat or Stream message within HeartbeatTimeout of {opts.heartbeat_timeout:g} s"
    return f"TotalDuration of {opts.total_duration:g} s expired"


def server_timeout_detail(kind: str) -> str:
    """The detail a Dex server gives for a timeout, in the recovery error and the failed
    flow's message: Temporal's timeout message (`timeoutError.Message()`)."""
    return f"activity {kind} timeout"


TIE_SECONDS = 1.0  # Dex limits have whole-second precision


def earliest_deadline(attempt_deadline: float, heartbeat_deadline: float,
                      total_deadline: float) -> tuple[float, str]:
    """The first limit to expire, and its kind.

    Deadlines less than a second apart count as a tie, won by StartToClose, then Heartbeat:
    when ExecuteMethodTimeout equals TotalDuration (the seed's MAX_JOB_WAIT), the total
    deadline, set when the step was scheduled, falls a few milliseconds before the attempt's,
    and Dex reports the attempt timeout.
    """
    # min() of the three, written out: every attempt arms its watchdog through here
    t = heartbeat_deadline if heartbeat_deadline < attempt_deadline else attempt_deadline
    if total_deadline < t:
        t = total_deadline
    if attempt_deadline - t < TIE_SECONDS:
        return t, TIMEOUT_ORDER[0]
    if heartbeat_deadline - t < TIE_SECONDS:
        return t, TIMEOUT_ORDER[1]
    if total_deadline - t < TIE_SECONDS:
        return t, TIMEOUT_ORDER[2]
    raise ValueError(f"no deadline among {attempt_deadline}, {heartbeat_deadline}, {total_deadline}")
