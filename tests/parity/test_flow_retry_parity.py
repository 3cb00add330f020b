"""The flow retry policy against the official SDK: `StartFlowOptions.retry_policy` and
`SubFlowOptions.retry_policy` are the same fields (name, position among the public fields,
default) and take the same RetryPolicy; what dex stores of a policy is what the official Client
sends the server (`Client._map_flow_retry`: the FlowRetryPolicy message) with the server's
defaults for unset fields (flowRetryDefaults: 1 s, x2, 100 s); what the official Client refuses
to send, dex refuses too — and the one field it drops without a word (total_duration: Dex's
FlowRetryPolicy has none), dex refuses rather than ignore."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest

from dexcli.engine.retry_policy import policy_json
from tests.parity.parity_kit import official, sdk_module


def public_fields(api: Any, cls: str) -> list[tuple[str, Any]]:
    return [(f.name, f.default) for f in dataclasses.fields(getattr(api, cls)) if not f.name.startswith("_")]


@pytest.mark.parametrize("cls", ["StartFlowOptions", "SubFlowOptions"])
def test_retry_policy_is_an_official_field_in_the_same_place(cls: str) -> None:
    official()
    mine, theirs = public_fields(sdk_module("dexcli"), cls), public_fields(sdk_module("dex"), cls)
    assert ("retry_policy", None) in mine and ("retry_policy", None) in theirs
    names = [n for n, _ in theirs]
    at = names.index("retry_policy")
    assert [n for n, _ in mine][at - 1:at + 1] == names[at - 1:at + 1]  # after the same field


def policies(api: Any) -> list[Any]:
    R = api.RetryPolicy
    return [
        R(),
        R(maximum_attempts=3),
        R(initial_interval=timedelta(minutes=1), backoff_coefficient=2, maximum_interval=timedelta(minutes=10),
          maximum_attempts=3),
        R(initial_interval=timedelta(seconds=5), backoff_coefficient=1.5),
        R(maximum_interval=timedelta(seconds=300)),
    ]


def server_view(message: Any) -> dict[str, Any]:
    """The FlowRetryPolicy message as the server applies it (flowRetryDefaults: zero -> default)."""
    return {"initialInterval": float(message.initial_interval_seconds or 1),
            "backoffCoefficient": float(message.backoff_coefficient or 2),
            "maximumInterval": float(message.maximum_interval_seconds or 100),
            "maximumAttempts": message.maximum_attempts}


@pytest.mark.parametrize("index", range(len(policies(sdk_module("dexcli")))))
def test_dex_stores_what_the_official_client_sends(index: int) -> None:
    dex = official()
    sent = dex.Client._map_flow_retry(policies(dex)[index])
    stored = policy_json(policies(sdk_module("dexcli"))[index], "StartFlowOptions")
    assert stored is not None
    assert json.loads(stored) == server_view(sent)


def test_what_the_official_client_cannot_send_dex_refuses() -> None:
    dex = official()
    for seconds in (1.5, -1):
        with pytest.raises(ValueError):
            dex.Client._map_flow_retry(dex.RetryPolicy(initial_interval=timedelta(seconds=seconds)))
        with pytest.raises(ValueError):
            policy_json(sdk_module("dexcli").RetryPolicy(initial_interval=timedelta(seconds=seconds)),
                        "StartFlowOptions")


def test_total_duration_which_the_official_client_drops_dex_refuses() -> None:
    dex = official()
    sent = dex.Client._map_flow_retry(dex.RetryPolicy(total_duration=timedelta(hours=1)))
    assert "total_duration" not in str(sent.DESCRIPTOR.fields_by_name)  # the message has no such field
    with pytest.raises(ValueError, match="no total_duration"):
        policy_json(sdk_module("dexcli").RetryPolicy(total_duration=timedelta(hours=1)), "StartFlowOptions")
