"""SubFlow's names against the official SDK: SubFlowOptions' fields, order and defaults,
SubFlowReusePolicy, the condition `SubFlow.run` builds (its condition id from the options),
and the calls both accept or refuse alike. A flow that waits on a SubFlow registers the same
under both SDKs (tests/parity/test_registration_parity.py: fan_out)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from tests.parity.parity_kit import official, sdk_module


def fields(api: Any) -> list[tuple[str, Any]]:
    def plain(v: Any) -> Any:
        return v.name if isinstance(v, enum.Enum) else v

    out = []
    for f in dataclasses.fields(api.SubFlowOptions):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append((f.name, plain(default)))
    return out


def test_subflow_options_have_the_official_fields_and_defaults() -> None:
    official()
    assert fields(sdk_module("dexcli")) == fields(sdk_module("dex"))


def test_subflow_options_are_frozen_under_both() -> None:
    official()
    for sdk in ("dexcli", "dex"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            sdk_module(sdk).SubFlowOptions().timeout = timedelta(1)  # type: ignore[misc]


def child(api: Any) -> Any:
    class Child(api.Step[int]):  # type: ignore[name-defined,misc]
        def execute(self, context: api.Context, n: int) -> api.StepDecision:  # type: ignore[name-defined]
            return api.graceful_complete(n)

    class ChildFlow(api.Flow[int]):  # type: ignore[name-defined,misc]
        def get_steps(self) -> Any:
            return api.StepList.start_step(Child())

    return ChildFlow()


@pytest.mark.parametrize("sdk", ["dexcli", "dex"])
def test_run_builds_a_subflow_condition_with_the_options_condition_id(sdk: str) -> None:
    official()
    api = sdk_module(sdk)
    flow = child(api)
    cond = api.SubFlow.run(flow, 3, api.SubFlowOptions(condition_id="c", reuse_policy=api.SubFlowReusePolicy.ATTACH))
    assert type(cond).__name__ == "SubFlowCondition"
    assert (cond.condition_id, cond.flow, cond.input, cond.options.reuse_policy.name) == ("c", flow, 3, "ATTACH")
    assert api.SubFlow.run(flow, 3).condition_id is None
    api.Wait.all_of(cond, api.Timer.by_duration(timedelta(seconds=1)))  # a Wait takes it


def attr_map(api: Any) -> Any:
    return api.AttributeMap("m", int)


CALLS: list[tuple[str, Callable[[Any], Any]]] = [
    ("with_attribute(attr, v)", lambda api: api.SubFlowOptions().with_attribute(api.Attribute("a", int), 1)),
    ("with_attribute(map, i, v)", lambda api: api.SubFlowOptions().with_attribute(attr_map(api), "i", 1)),
    ("with_attribute(attr, i, v)", lambda api: api.SubFlowOptions().with_attribute(api.Attribute("a", int), "i", 1)),
    ("with_attribute(map, v)", lambda api: api.SubFlowOptions().with_attribute(attr_map(api), 1)),
    ("with_attribute(map, 1, v)", lambda api: api.SubFlowOptions().with_attribute(attr_map(api), 1, 1)),
    ("with_attribute(map, 'a/b', v)", lambda api: api.SubFlowOptions().with_attribute(attr_map(api), "a/b", 1)),
    ("SubFlow.run(None, 1)", lambda api: api.SubFlow.run(None, 1)),
    ("get_condition_results(object())", lambda api: api.SubFlow.get_condition_results(object())),
    ("get_flow_id(object(), 0)", lambda api: api.SubFlow.get_flow_id(object(), 0)),
    ("SubFlowOptions(condition_id='')",
     lambda api: api.SubFlow.run(child(api), 1, api.SubFlowOptions(condition_id=""))),
]


def outcome(sdk: str, call: Callable[[Any], Any]) -> str:
    try:
        call(sdk_module(sdk))
    except Exception as exc:  # the outcome under test
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize(("text", "call"), [pytest.param(t, c, id=t) for t, c in CALLS])
def test_the_same_calls_succeed_and_fail(text: str, call: Callable[[Any], Any]) -> None:
    official()
    assert outcome("dexcli", call) == outcome("dex", call)


def test_with_attribute_appends_in_order_under_both() -> None:
    official()
    for sdk in ("dexcli", "dex"):
        api = sdk_module(sdk)
        a, b = api.Attribute("a", int), api.Attribute("b", int)
        opts = api.SubFlowOptions().with_attribute(a, 1).with_attribute(b, 2)
        inits = opts._attribute_initializations
        assert len(inits) == 2 and opts != api.SubFlowOptions()
