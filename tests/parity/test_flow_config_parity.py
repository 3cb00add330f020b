"""FlowConfig against the official SDK: the same fields and enums, and what dex stores of a
FlowConfig (and shows as `state.flowConfig`) is what the official Client sends the server for
it — the protojson of its `FlowConfig` message (`Client._map_flow_config`) — field for field.
The names continue-as-new and FlowConfig add to the clients are in test_api_parity's SIGNATURES."""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace
from typing import Any

import pytest

import dexcli
from dexcli.engine.flow_config import config_fields
from tests.parity.parity_kit import official


def configs(api: Any) -> list[Any]:
    return [
        api.FlowConfig(),
        api.FlowConfig(step_durability=api.StepDurability.ASYNC),
        api.FlowConfig(step_durability=api.StepDurability.SYNC, continue_as_new_threshold=10),
        api.FlowConfig(step_durability=api.StepDurability.DEFAULT),
        api.FlowConfig(continue_as_new_threshold=0, continue_as_new_page_size_bytes=2048),
        api.FlowConfig(active_step_search_mode=api.ActiveStepSearchMode.ALL),
        api.FlowConfig(active_step_search_mode=api.ActiveStepSearchMode.WITH_WAIT_FOR),
        api.FlowConfig(active_step_search_mode=api.ActiveStepSearchMode.DISABLED),
        api.FlowConfig(active_step_search_mode=api.ActiveStepSearchMode.DEFAULT),
        api.FlowConfig(attribute_store_names=["orders", "audit"]),
        api.FlowConfig(attribute_store_names=[]),
    ]


def official_protojson(dex: Any, config: Any) -> dict[str, Any]:
    from google.protobuf.json_format import MessageToDict

    client = SimpleNamespace(options=SimpleNamespace(worker_target=None))  # no client-wide worker target
    message = dex.Client._map_flow_config(client, config)
    return dict(MessageToDict(message))


@pytest.mark.parametrize("index", range(len(configs(dexcli))))
def test_dex_stores_what_the_official_client_sends(index: int) -> None:
    dex = official()
    mine = config_fields(configs(dexcli)[index], "test")
    assert mine == official_protojson(dex, configs(dex)[index])


def test_the_same_fields_in_the_same_order_with_the_same_defaults() -> None:
    dex = official()
    ours = [(f.name, f.default) for f in dataclasses.fields(dexcli.FlowConfig)]
    theirs = [(f.name, f.default) for f in dataclasses.fields(dex.FlowConfig)]
    assert ours == theirs
    assert dexcli.FlowConfig.__dataclass_params__.frozen and dex.FlowConfig.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_active_step_search_mode_has_the_official_members_and_values() -> None:
    dex = official()
    assert [(m.name, m.value) for m in dexcli.ActiveStepSearchMode] == \
        [(m.name, m.value) for m in dex.ActiveStepSearchMode]


def test_start_flow_options_takes_config_override_by_keyword_as_the_official_one_does() -> None:
    dex = official()
    for api in (dexcli, dex):
        options = api.StartFlowOptions(config_override=api.FlowConfig(continue_as_new_threshold=3))
        assert options.config_override.continue_as_new_threshold == 3
        assert inspect.signature(api.StartFlowOptions).parameters["config_override"].default is None


def test_worker_target_is_what_dex_refuses() -> None:
    """The one field the official client sends that dex cannot honour (no worker endpoints)."""
    dex = official()
    message = official_protojson(dex, dex.FlowConfig(worker_target=dex.WorkerTarget("worker-canary:8803")))
    assert "workerTarget" in message
    with pytest.raises(dexcli.sdk.errors.NotSupportedYetError, match="worker_target"):
        config_fields(dexcli.FlowConfig(worker_target=object()), "update_flow_config")
