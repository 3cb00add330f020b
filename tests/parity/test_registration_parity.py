"""Registration parity: each corpus flow, loaded under dexcli and under the official SDK with the
import line swapped, gets the same verdict from each SDK's Registry; an accepted flow has the
same step graph (start step, steps, input types, resolved options, failure routes) and a
rejected one is refused for the same reason (both messages carry the official wording).

`stricter` cases are the deliberate differences: dexcli refuses at registration what a Dex
server accepts at registration and only fails later. Nothing the official Registry refuses may
pass dexcli's. A flow without a start step and failure routes register under both; a route a
worker cannot map (`maps=False`) fails under both when the step's options are mapped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from dexcli.sdk.errors import InvalidStepResultError
from tests.parity.parity_kit import CORPUS, ROOT, load, official, readme_example, register
from tests.parity.parity_kit import graph as graph_of

ASYNC = {"allow_async_handlers": True}


def corpus(name: str) -> Callable[[], str]:
    return lambda: (CORPUS / f"{name}.py").read_text(encoding="utf-8")


def repo_file(path: str) -> Callable[[], str]:
    return lambda: (ROOT / path).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Case:
    name: str
    expect: str  # "accept" | "reject" | "stricter" (dexcli rejects, the official Registry accepts)
    phrase: str = ""  # reject: what both messages say (compared case-insensitively)
    registry: dict[str, Any] = field(default_factory=dict)  # Registry(..., **registry) under both SDKs
    gap: str = ""  # a known divergence not fixed yet: the case is a strict xfail with this reason
    maps: bool = True  # False: a step's options route failures where no worker can follow
    source: Callable[[], str] | None = None

    def text(self) -> str:
        return (self.source or corpus(self.name))()


CASES = [
    # the repo's examples and the README's, as they are
    Case("three_steps", "accept", source=repo_file("flows/three_steps.py")),
    Case("polling", "accept", registry=ASYNC, source=repo_file("flows/polling.py")),
    Case("polling_default_registry", "reject", "execute must be synchronous", source=repo_file("flows/polling.py")),
    Case("approval", "accept", source=repo_file("flows/approval.py")),
    Case("payment", "accept", registry=ASYNC, source=repo_file("flows/payment.py")),
    Case("fan_out", "accept", source=repo_file("flows/fan_out.py")),
    Case("readme_myflow", "accept", source=readme_example),
    # valid flows
    Case("generator_progress", "accept"),
    Case("options_and_routes", "accept"),
    Case("primitives", "accept"),
    Case("async_allowed", "accept", registry=ASYNC),
    Case("go_to_instance", "accept"),
    Case("codec_custom_types", "accept"),
    Case("waits_state_and_rpcs", "accept"),
    Case("submodule_imports", "accept"),
    Case("no_start_step", "accept"),
    Case("route_other_input", "accept"),
    Case("route_unregistered", "accept", maps=False),
    Case("route_instance", "accept", maps=False),
    # one per rejection rule
    Case("reject_no_return_annotation", "reject", "execute must return StepDecision"),
    Case("reject_wrong_return_annotation", "reject", "execute must return StepDecision"),
    Case("reject_iterator_generator", "reject",
         "execute generator must return Generator[StepOutput, None, StepDecision]"),
    Case("reject_generator_returning_any", "reject",
         "execute generator must return Generator[StepOutput, None, StepDecision]"),
    Case("reject_input_dict", "reject", "no codec for dict"),
    Case("reject_input_any", "reject", "no codec for Any"),
    Case("reject_input_optional", "reject", "no codec for Optional"),
    Case("reject_input_union_none", "reject", "no codec for str | None"),
    Case("reject_input_object", "reject", "no codec for object"),
    Case("reject_input_plain_class", "reject", "no codec for Point"),
    Case("reject_codec_missing_one", "reject", "no codec for object"),
    Case("reject_async_by_default", "reject", "execute must be synchronous"),
    Case("reject_async_generator", "reject", "execute must not be an async generator", registry=ASYNC),
    Case("reject_sync_with_async_context", "reject", "execute context must be Context"),
    Case("reject_async_with_context", "reject", "execute context must be AsyncContext", registry=ASYNC),
    Case("reject_unannotated_input", "reject", "execute input must be annotated"),
    Case("reject_unannotated_context", "reject", "execute context must be Context"),
    Case("reject_extra_parameter", "reject", "execute must accept context and input"),
    Case("reject_unresolvable_annotation", "reject", "name 'Decimal' is not defined"),
    Case("reject_duplicate_step_type", "reject", "duplicate step"),
    Case("reject_duplicate_step_class", "reject", "duplicate step class Bad"),
    Case("reject_rpc_return", "reject", "must return RPCResult[O] or None"),
    Case("reject_rpc_async_default", "reject", "must be synchronous"),
    Case("reject_rpc_unannotated_input", "reject", "input must be annotated"),
    # deliberate differences: refused by dexcli at registration, by a Dex server later
    Case("stricter_short_heartbeat", "stricter"),
    Case("stricter_attribute_store", "stricter"),
]


def params() -> list[Any]:
    marks = lambda c: [pytest.mark.xfail(reason=c.gap, strict=True)] if c.gap else []  # noqa: E731
    return [pytest.param(c, id=c.name, marks=marks(c)) for c in CASES]


@pytest.mark.parametrize("case", params())
def test_both_registries_give_the_same_verdict(case: Case) -> None:
    official()
    source = case.text()
    mine = register(load(case.name, source, "dexcli"), "dexcli", **case.registry)
    theirs = register(load(case.name, source, "dex"), "dex", **case.registry)
    if case.expect == "stricter":
        assert theirs.accepted, f"the official Registry now refuses {case.name}: {theirs.message}"
        assert not mine.accepted, f"dexcli accepts {case.name}, documented as refused at registration"
        return
    assert mine.accepted == theirs.accepted, (
        f"{case.name}: dexcli {'accepts' if mine.accepted else 'rejects'} it ({mine.message or 'ok'}), "
        f"the official Registry {'accepts' if theirs.accepted else 'rejects'} it ({theirs.message or 'ok'})")
    assert mine.accepted == (case.expect == "accept"), f"{case.name}: expected {case.expect}"
    if case.expect == "reject":
        assert case.phrase.lower() in theirs.message.lower(), f"official message changed: {theirs.message}"
        assert case.phrase.lower() in mine.message.lower(), (
            f"dexcli refuses {case.name} for another reason than the official SDK:\n"
            f"  dexcli:   {mine.message}\n  official: {theirs.message}")


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES if c.expect == "accept" and c.maps])
def test_accepted_flows_have_the_same_step_graph(case: Case) -> None:
    official()
    source = case.text()
    mod_mine, mod_theirs = load(case.name, source, "dexcli"), load(case.name, source, "dex")
    mine = register(mod_mine, "dexcli", **case.registry)
    theirs = register(mod_theirs, "dex", **case.registry)
    assert mine.accepted and theirs.accepted, (mine.message, theirs.message)
    assert graph_of(mine, "dexcli", mod_mine) == graph_of(theirs, "dex", mod_theirs)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES if not c.maps])
def test_a_route_no_worker_can_follow_fails_under_both_when_the_options_are_mapped(case: Case) -> None:
    official()
    source = case.text()
    mod_mine, mod_theirs = load(case.name, source, "dexcli"), load(case.name, source, "dex")
    mine, theirs = register(mod_mine, "dexcli", **case.registry), register(mod_theirs, "dex", **case.registry)
    assert mine.accepted and theirs.accepted, (mine.message, theirs.message)
    with pytest.raises(Exception):  # noqa: B017 - "Step class is not registered", or for an instance an AttributeError
        graph_of(theirs, "dex", mod_theirs)
    with pytest.raises(InvalidStepResultError, match="on_execute_failure_proceed_to"):
        graph_of(mine, "dexcli", mod_mine)


def test_the_corpus_has_a_case_for_every_file_and_every_example() -> None:
    names = {c.name for c in CASES}
    assert {p.stem for p in CORPUS.glob("*.py")} <= names
    examples = {p.stem for p in (ROOT / "flows").glob("*.py")} - {"__init__", "job_service", "plugins"}
    assert examples <= names, f"flows/ examples without a parity case: {sorted(examples - names)}"
