"""A run's FlowConfig, as dex keeps and applies it (the server's flowConfiger.go).

Stored on the flow row (`flows.flow_config`) as the protojson of the server's FlowConfig, only
the fields that were set: `activeStepSearchMode`, `continueAsNewThreshold`,
`continueAsNewPageSizeInBytes`, `stepDurability`, `attributeStoreNames {names}`. A start's
`config_override` is applied over dex's defaults; `Client.update_flow_config` merges the fields
it sets over the run's (UpdateByAPI); a SubFlow child starts with its parent's, its
`SubFlowOptions.config_override` merged over it (transitions/subflows.py); a continue-as-new
carries it to the new run. `dex inspect --json` shows the run's config over dex's
defaults as `state.flowConfig` (engine.views.FLOW_CONFIG_DEFAULTS).

What each field does in dex:

    step_durability                  the default durability of the flow's methods (method_durability)
    continue_as_new_threshold        0: off; n: the run continues as new once it has n tracked events
                                     (transitions/continuing.py)
    continue_as_new_page_size_bytes  0: 1 MiB. A new run's carried state moves in place, in one
                                     transaction: FlowContinued records the pages the server's
                                     paged read would have taken
    active_step_search_mode          which of the run's active steps the search key ActiveStepTypes
                                     sees (dexcli.store.query_sql): with a wait_for (default), all, none
    attribute_store_names            the Attribute Stores the run's synced attributes project to
                                     (engine/attribute_sync.py: route); a name dex.toml does not
                                     define is refused at start and at update
    worker_target                    refused: every step runs in the process that drives its flow
"""

from __future__ import annotations

import functools
import json
from typing import Any

from dexcli.sdk.errors import NotSupportedYetError
from dexcli.sdk.flow_config import ActiveStepSearchMode, FlowConfig
from dexcli.sdk.options import ResolvedOptions, StepDurability

DEFAULT_PAGE_SIZE = 1024 * 1024  # the server's DefaultContinueAsNewPageSizeInBytes
MAX_PAGE_SIZE = 4 * 1024 * 1024  # a page is one gRPC message: the server refuses more than its limit (4 MiB)
INT32_MAX = 2**31 - 1

_SEARCH_MODES = {ActiveStepSearchMode.DEFAULT: "ACTIVE_STEP_SEARCH_MODE_UNSPECIFIED",
                 ActiveStepSearchMode.ALL: "ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL",
                 ActiveStepSearchMode.WITH_WAIT_FOR: "ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_STEPS_WITH_WAIT_FOR",
                 ActiveStepSearchMode.DISABLED: "ACTIVE_STEP_SEARCH_MODE_DISABLED"}
_DURABILITIES = {StepDurability.DEFAULT: "STEP_DURABILITY_UNSPECIFIED", StepDurability.SYNC: "STEP_DURABILITY_SYNC",
                 StepDurability.ASYNC: "STEP_DURABILITY_ASYNC"}


def config_fields(config: FlowConfig, where: str) -> dict[str, Any]:
    """The fields `config` sets, in the stored form; ValueError/TypeError for a value Dex
    refuses, NotSupportedYetError for a field that means nothing in dex. `where` names the
    call in the message (`StartFlowOptions(config_override=...)`, `update_flow_config`)."""
    if not isinstance(config, FlowConfig):
        raise TypeError(f"{where} takes a FlowConfig, not {type(config).__name__}")
    if config.worker_target is not None:
        raise NotSupportedYetError(
            f"{where}: FlowConfig(worker_target=...) routes steps to a Worker endpoint, and dex runs every "
            "step in the process that drives its flow; leave it None")
    out: dict[str, Any] = {}
    if config.active_step_search_mode is not None:
        if not isinstance(config.active_step_search_mode, ActiveStepSearchMode):
            raise TypeError(f"{where}: active_step_search_mode takes an ActiveStepSearchMode")
        out["activeStepSearchMode"] = _SEARCH_MODES[config.active_step_search_mode]
    for name, key, upper in (("continue_as_new_threshold", "continueAsNewThreshold", INT32_MAX),
                             ("continue_as_new_page_size_bytes", "continueAsNewPageSizeInBytes", MAX_PAGE_SIZE)):
        value = getattr(config, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: {name} takes an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{where}: {name} must be >= 0, got {value}")
        if value > upper:
            raise ValueError(f"{where}: {name} must be at most {upper}, got {value}")
        out[key] = value
    if config.step_durability is not None:
        if not isinstance(config.step_durability, StepDurability):
            raise TypeError(f"{where}: step_durability takes a StepDurability")
        out["stepDurability"] = _DURABILITIES[config.step_durability]
    if config.attribute_store_names is not None:
        names = config.attribute_store_names
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise TypeError(f"{where}: attribute_store_names takes a list of non-empty names")
        out["attributeStoreNames"] = {"names": list(names)} if names else {}  # protojson leaves an empty list out
    return out


def start_config(config: FlowConfig | None) -> str | None:
    """What a start stores of `config_override` (None: nothing set)."""
    if config is None:
        return None
    fields = config_fields(config, "StartFlowOptions(config_override=...)")
    return json.dumps(fields) if fields else None


def merged(stored: str | None, update: dict[str, Any]) -> str | None:
    """The run's config once `update`'s fields replace its own (the server's UpdateByAPI)."""
    out = {**(json.loads(stored) if stored else {}), **update}
    return json.dumps(out) if out else None


def flow_durability(stored: dict[str, Any]) -> str | None:
    """The run's default durability by StepDurability name ("SYNC", "ASYNC"), None when unset."""
    value = stored.get("stepDurability")
    return None if value in (None, "STEP_DURABILITY_UNSPECIFIED") else str(value).removeprefix("STEP_DURABILITY_")


def method_durability(opts: ResolvedOptions, flow_default: str | None) -> str:
    """How a method's result is committed ("SYNC" or "ASYNC"), the server's rule
    (resolveDurability): the method's own durability; else SYNC for a method with a failure
    route (an execute's `on_execute_failure_proceed_to`, a wait_for's PROCEED), whatever the
    FlowConfig says; else the FlowConfig's `step_durability`; else SYNC (dex's default, the
    official SDK's; the server's own is ASYNC)."""
    if opts.durability != "DEFAULT":
        return opts.durability
    if opts.failure_step is not None or opts.wait_for_failure == "PROCEED":
        return "SYNC"
    return flow_default or "SYNC"


def durability_of(opts: ResolvedOptions, flow_config: str | None) -> str:
    """method_durability with the flow's stored config (FlowRecord.flow_config)."""
    if opts.durability != "DEFAULT" or flow_config is None:
        return method_durability(opts, None)
    return method_durability(opts, flow_durability(_parsed(flow_config)))


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> dict[str, Any]:
    return dict(json.loads(text))


def threshold(stored: dict[str, Any]) -> int:
    """The run's continue-as-new threshold (0: off)."""
    return int(stored.get("continueAsNewThreshold", 0))


def page_size(stored: dict[str, Any]) -> int:
    value = int(stored.get("continueAsNewPageSizeInBytes", 0))
    return value or DEFAULT_PAGE_SIZE
