"""What an operator can change about one flow from outside its steps, as records for
`Engine.change`: a stop, a skipped timer, a time travel (`TimeTravelRequest`, kept beside its
transition in dexcli.engine.transitions.time_travel), a FlowConfig update, a continue-as-new,
a time skip. One verb takes them all, so the face stays small as Dex's model adds operator
changes; each record names its flow (a time skip, the flows it moves)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True, slots=True)
class UpdateFlowConfig:
    """Client.update_flow_config: FlowConfig fields (checked: dexcli.engine.flow_config's
    `config_fields`) merged into the running flow's."""

    flow_id: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ContinueAsNew:
    """Client.trigger_continue_as_new: the running flow rolled over into a new run now."""

    flow_id: str
    reason: str = "trigger_continue_as_new"
    run_id: str | None = None  # the Dex CLI's --run-id: refused unless it is the current run


@dataclass(frozen=True, slots=True)
class TimeSkip:
    """`dex time skip`: these flows' clocks (None: every running flow's) moved forward by
    `seconds` (Store.skip_flows: the flows a live process holds do not move)."""

    flow_ids: tuple[str, ...] | None
    seconds: float


Change = StopFlow | SkipTimer | TimeTravelRequest | UpdateFlowConfig | ContinueAsNew | TimeSkip

__all__ = ["Change", "ContinueAsNew", "SkipTimer", "StopFlow", "TimeSkip", "TimeTravelRequest", "UpdateFlowConfig"]
