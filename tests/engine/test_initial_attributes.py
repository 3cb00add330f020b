"""StartFlowOptions.with_attribute: initial values committed with the start, seen by the
first step's snapshot, recorded in FlowStarted; an attribute the flow lacks is refused."""

from __future__ import annotations

import json

import pytest

from dexcli import StartFlowOptions
from dexcli.sdk.errors import ValueMappingError
from dexcli.testing import DexTestEnv
from tests.engine.attribute_flows import RetryFlow, counter, notes


def test_initial_values_are_seen_by_the_first_step_and_recorded() -> None:
    with DexTestEnv(start=0.0) as env:
        env.client.start_flow(RetryFlow(), "f", 5, StartFlowOptions().with_attribute(counter, 10))
        result = env.client.wait_for_flow("f")
        assert result.single_output() == 10  # the step read the initial value
        values = {k: json.loads(v) for k, _, _, v in env.store.read(lambda tx: tx.attribute_values("f"))}
        assert values == {"counter": 15}
        started = next(e for e in env.inspect("f")["history"] if e["type"] == "FlowStarted")
        assert started["initialAttributes"] == {"counter": 10}


def test_an_attribute_the_flow_does_not_declare_is_refused_before_anything_starts() -> None:
    with DexTestEnv(start=0.0) as env:
        with pytest.raises(ValueMappingError, match="notes"):
            env.client.start_flow(RetryFlow(), "f", 5, StartFlowOptions().with_attribute(notes, "k", "v"))
        assert env.store.get_flow("f") is None


def test_with_attribute_checks_its_arguments_as_the_sdk_does() -> None:
    with pytest.raises(TypeError):
        StartFlowOptions().with_attribute(counter, "k", 1)
    with pytest.raises(ValueError):
        StartFlowOptions().with_attribute(notes, "a/b", "v")
