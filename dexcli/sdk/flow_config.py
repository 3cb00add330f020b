"""Per-flow settings a run keeps and a client may change (Dex names): FlowConfig and
ActiveStepSearchMode. Definitions only: what dex does with each field is
dexcli.engine.flow_config's."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from dexcli.sdk.options import StepDurability


class ActiveStepSearchMode(enum.Enum):
    """Which active steps a flow search may index: the server's default, all, only those with a
    wait_for, or none."""

    DEFAULT = "default"
    ALL = "all"
    WITH_WAIT_FOR = "with_wait_for"
    DISABLED = "disabled"


@dataclass(frozen=True)
class FlowConfig:
    """Override server behaviour for one flow execution; every None field keeps the default.
    Given at start (`StartFlowOptions(config_override=...)`) or merged into an active flow's
    (`Client.update_flow_config`: the fields that are not None replace the run's).

    `step_durability` is the default durability of the flow's step methods (a method's own
    durability wins; a method with a failure route runs SYNC unless it names one);
    `continue_as_new_threshold` (0: off) starts a new run once the run has that many tracked
    events; `continue_as_new_page_size_bytes` (0: 1 MiB) bounds each page of what a new run
    carries; `active_step_search_mode` is kept and shown; `attribute_store_names` names the
    Attribute Stores attribute syncs project into ([] turns them off). `worker_target` has no
    meaning in dex (every step runs in the process that drives its flow) and is refused."""

    active_step_search_mode: ActiveStepSearchMode | None = None
    continue_as_new_threshold: int | None = None
    continue_as_new_page_size_bytes: int | None = None
    step_durability: StepDurability | None = None
    worker_target: Any = None
    attribute_store_names: list[str] | None = None
