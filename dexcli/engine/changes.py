"""What an operator can change about one flow from outside its steps, as records for
`Engine.change`: a stop, a skipped timer, a time travel (`TimeTravelRequest`, kept beside its
transition in dexcli.engine.transitions.time_travel). One verb takes them all, so the face
stays small as Dex's model adds operator changes; each record names its flow."""

from __future__ import annotations

from dataclasses import dataclass

from dexcli.engine.transitions.time_travel import TimeTravelRequest


@dataclass(frozen=True, slots=True)
class StopFlow:
    """Client.stop_flow / `dex stop`: CANCEL, TERMINATE or FAIL, with an optional reason."""

    flow_id: str
    stop_type: str = "CANCEL"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SkipTimer:
    """Client.skip_timer / `dex skip-timer`: a pending timer of a waiting step execution made
    ready now (by its condition id, or its index among the step's timers)."""

    flow_id: str
    step_execution_id: str
    condition_id: str | None = None
    condition_index: int | None = None


Change = StopFlow | SkipTimer | TimeTravelRequest

__all__ = ["Change", "SkipTimer", "StopFlow", "TimeTravelRequest"]
