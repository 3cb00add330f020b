"""Dex's job-post and drain-signal-channels examples, as ported in
tests/engine/test_rpc_and_drain_examples.py, and the flow primitive (test_config_examples.py),
register under the official SDK 1.23 (the same source, its `from dexcli import` line swapped) as
under dexcli, with the same step graph: a flow without a start step, a movement to a Step[str]
with None, RPCs that start steps and publish."""

from __future__ import annotations

from typing import Any

import pytest

from tests.parity.parity_kit import ROOT, Verdict, load, official, sdk_module
from tests.parity.parity_kit import graph as graph_of

SOURCE = ROOT / "tests" / "engine" / "test_rpc_and_drain_examples.py"
FLOW_PRIMITIVE = ROOT / "tests" / "engine" / "test_config_examples.py"


def registered(sdk: str, build: str, source: Any = SOURCE) -> tuple[Verdict, Any]:
    module = load(f"ported_{source.stem}", source.read_text(encoding="utf-8"), sdk)
    flow = eval(build, vars(module))  # noqa: S307 - a constructor call of the module's own names
    registry = sdk_module(sdk).Registry([flow], allow_async_handlers=True)  # an AsyncWorker's
    return Verdict(True, registry=registry, flow=flow), module


@pytest.mark.parametrize("build", ["JobPostFlow(MyDependencyService())", "DrainSignalChannelsFlow()"])
def test_the_ported_example_registers_alike_under_both_sdks(build: str) -> None:
    official()
    mine, mod_mine = registered("dexcli", build)
    theirs, mod_theirs = registered("dex", build)
    assert graph_of(mine, "dexcli", mod_mine) == graph_of(theirs, "dex", mod_theirs)


def test_job_post_has_no_start_step_under_either_sdk() -> None:
    official()
    for sdk in ("dexcli", "dex"):
        verdict, module = registered(sdk, "JobPostFlow(MyDependencyService())")
        assert graph_of(verdict, sdk, module)["start"] is None


@pytest.mark.parametrize("tp", [str, int, float, bool, bytes, list[int]])
def test_none_is_null_for_any_type_under_both_codecs(tp: Any) -> None:
    """drain-signal's `StepMovement.of(ProcessSignal, None)` into a Step[str] relies on it."""
    official()
    from dex import CodecRegistry
    from dex._value_mapper import ValueMapper

    from dexcli.sdk.codec import decode, encode

    mapper = ValueMapper(CodecRegistry())
    codec = CodecRegistry().resolve(tp)
    wire = mapper.encode(None, codec)
    assert wire.WhichOneof("kind") == "null_value" and mapper.decode(wire, codec) is None
    assert encode(None) == "null" and decode("null", tp) is None


def test_the_flow_primitive_registers_alike_and_its_start_options_build_under_both_sdks() -> None:
    official()
    mine, mod_mine = registered("dexcli", "ExampleFlow()", FLOW_PRIMITIVE)
    theirs, mod_theirs = registered("dex", "ExampleFlow()", FLOW_PRIMITIVE)
    assert graph_of(mine, "dexcli", mod_mine) == graph_of(theirs, "dex", mod_theirs)
    for module in (mod_mine, mod_theirs):  # the controller's options: a timeout and a FlowConfig
        options = module.start_flow_options()
        assert options.config_override.step_durability.name == "SYNC"

