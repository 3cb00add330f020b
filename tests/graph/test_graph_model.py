from __future__ import annotations

import textwrap
import types

import pytest

from dexcli import Context, Flow, Registry, Step, StepDecision, StepList, go_to, graceful_complete
from dexcli.cli.loader import load_flow
from dexcli.graph import build_graph
from dexcli.graph.checks import static_problems
from dexcli.sdk.errors import FlowDefinitionError
from dexcli.sdk.registry import build_definition
from tests.graph.graph_helpers import load_bad

POLLING_EDGES = {
    ("START", "StartJob", "start"),
    ("StartJob", "AwaitJob", "goTo"),
    ("AwaitJob", "end", "gracefulComplete"),
    ("AwaitJob", "end", "forceFail"),
    ("AwaitJob", "RecordJobWaitFailure", "executeFailure"),
    ("RecordJobWaitFailure", "end", "forceFail"),
}


def edges(graph):
    return [(e.source, e.target, e.kind) for e in graph.edges]


def test_polling_graph_has_exactly_the_six_documented_edges():
    graph = build_graph(load_flow("polling")[0])
    assert graph.valid and graph.verdict == "Valid"
    assert graph.problems == []
    assert len(graph.edges) == 6
    assert set(edges(graph)) == POLLING_EDGES
    assert all(e.resolved for e in graph.edges)
    assert {n.id for n in graph.nodes} == {"START", "StartJob", "AwaitJob", "RecordJobWaitFailure", "end"}
    assert all(n.reachable for n in graph.nodes)
    start = graph.node("StartJob")
    assert start.is_start and start.file.endswith("flows/polling.py") and start.line


def test_three_steps_graph():
    graph = build_graph(load_flow("three-steps")[0])
    assert set(edges(graph)) == {("START", "First", "start"), ("First", "Second", "goTo"),
                                 ("Second", "Third", "goTo"), ("Third", "end", "gracefulComplete")}


def test_polling_registers_with_no_static_problems():
    definition = build_definition(load_flow("polling")[0], checks=static_problems)
    assert definition.warnings == []
    assert static_problems(definition) == ([], [])


def test_self_attr_and_go_to_many_targets_resolve_to_instances():
    graph = build_graph(load_bad("duplicate_class"))
    assert ("Begin", "EchoA", "goTo") in edges(graph) and ("Begin", "EchoB", "goTo") in edges(graph)


def test_runtime_target_is_marked_on_the_edge_not_guessed():
    graph = build_graph(load_bad("runtime_target"))
    assert graph.valid and graph.warnings == []
    (edge,) = graph.out_edges("Route")
    assert edge.kind == "goTo" and edge.target is None and not edge.resolved
    assert "self.pick(n)" in edge.detail and "run time" in edge.detail
    assert graph.node("Small").reachable is None  # unknown, not "unreachable"
    assert ("Small", "end", "forceComplete") in edges(graph)
    assert ("Large", "end", "deadEnd") in edges(graph)


def test_self_loop_edge():
    graph = build_graph(load_bad("timer_self_loop"))
    assert ("PollJob", "PollJob", "goTo") in edges(graph)


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("unknown_target", "targets a step that is not registered"),
        ("not_a_step_target", "self.jobs is a dict, not a step"),
        ("duplicate_class", "duplicate step class Echo"),
        ("duplicate_type", "duplicate step type Side"),
        ("wrong_context", "execute context must be AsyncContext"),
        ("short_heartbeat", "heartbeat_timeout 5 s is under the 10 s minimum"),
    ],
)
def test_invalid_flows_still_graph_with_their_reason(name, fragment):
    graph = build_graph(load_bad(name))
    assert not graph.valid and graph.verdict == "Invalid"
    assert len(graph.errors) == 1 and fragment in graph.errors[0]
    assert graph.warnings == []
    assert graph.nodes[0].id == "START"


def test_a_flow_without_a_start_step_graphs_valid_with_no_start_edge():
    graph = build_graph(load_bad("no_start"))
    assert graph.valid and graph.problems == []
    assert not any(e.kind == "start" for e in graph.edges)


def test_a_recovery_step_of_another_input_type_is_a_warning_not_an_error():
    graph = build_graph(load_bad("recovery_mismatch"))
    assert graph.valid and graph.errors == []
    (warning,) = graph.warnings
    assert "recovery step Recover takes int, but Work takes str" in warning


def test_unknown_target_fails_registration_naming_flow_step_and_target():
    with pytest.raises(FlowDefinitionError) as info:
        Registry([load_bad("unknown_target")], checks=static_problems)
    (msg,) = info.value.problems
    assert "flow UnknownTargetFlow" in msg and "step Begin" in msg and "Forgotten" in msg
    assert "unknown_target.py:12" in msg


def test_unreachable_step_is_a_registration_warning_not_an_error():
    definition = Registry([load_bad("unreachable")], checks=static_problems).get("UnreachableFlow")
    assert len(definition.warnings) == 1
    assert "step Orphan: unreachable" in definition.warnings[0]
    graph = build_graph(load_bad("unreachable"))
    assert graph.valid and graph.node("Orphan").reachable is False


def test_without_checks_the_registry_runs_no_static_checks():
    definition = Registry([load_bad("unknown_target")]).get("UnknownTargetFlow")
    assert definition is not None and definition.warnings == []
    assert Registry([load_bad("unreachable")]).get("UnreachableFlow").warnings == []


def test_static_checks_run_only_once_the_registrys_own_checks_passed():
    calls = []

    def checks(definition):
        calls.append(definition.flow_type)
        return ["flow X: from checks"], ["a warning"]

    with pytest.raises(FlowDefinitionError, match="under the 10 s minimum") as info:
        build_definition(load_bad("short_heartbeat"), checks=checks)
    assert calls == [] and "from checks" not in str(info.value)
    with pytest.raises(FlowDefinitionError) as info:
        build_definition(load_flow("polling")[0], checks=checks)
    assert calls == ["PollingFlow"] and info.value.problems == ["flow X: from checks"]


def test_a_bug_in_the_static_checks_is_raised_not_swallowed(monkeypatch):
    import dexcli.graph.checks as checks

    def broken(*args):
        raise KeyError("a bug")

    monkeypatch.setattr(checks, "analyze", broken)
    with pytest.raises(KeyError, match="a bug"):
        Registry([load_bad("unreachable")], checks=checks.static_problems)


def test_source_that_cannot_be_read_gives_no_findings(monkeypatch):
    import inspect

    class Unread(Step[None]):
        def execute(self, context: Context, input: None) -> StepDecision:
            return go_to(Nowhere, None)  # noqa: F821 - would be an unknown target, if it were read

    class UnreadFlow(Flow[None]):
        def get_steps(self):
            return StepList.start_step(Unread())

    def unreadable(obj):
        raise OSError("could not get source code")

    monkeypatch.setattr(inspect, "getsourcefile", unreadable)
    definition = build_definition(UnreadFlow(), checks=static_problems)
    assert definition.warnings == [] and static_problems(definition) == ([], [])


def test_source_not_available_gives_no_findings_and_never_raises():
    namespace: dict = {}
    code = textwrap.dedent(
        """
        class Hidden(Step[None]):
            def execute(self, context: Context, input: None) -> StepDecision:
                return graceful_complete(1)

        class HiddenFlow(Flow[None]):
            def get_steps(self):
                return StepList.start_step(Hidden())
        """
    )
    module = types.ModuleType("dex_hidden_module")
    namespace = module.__dict__
    namespace.update(Step=Step, Context=Context, StepDecision=StepDecision, graceful_complete=graceful_complete,
                     Flow=Flow, StepList=StepList, go_to=go_to)
    exec(compile(code, "<no source>", "exec"), namespace)
    flow = namespace["HiddenFlow"]()
    definition = build_definition(flow, checks=static_problems)  # registers: no static errors
    assert static_problems(definition) == ([], [])
    graph = build_graph(flow)
    assert graph.valid
    (edge,) = graph.out_edges("Hidden")
    assert not edge.resolved and "source not available" in edge.detail


def test_get_steps_raising_is_an_error_not_a_crash():
    class Broken(Flow[None]):
        def get_steps(self):
            raise RuntimeError("boom")

    graph = build_graph(Broken())
    assert not graph.valid and "get_steps raised RuntimeError: boom" in graph.errors[0]


def test_graph_package_imports_no_cli_or_engine_modules():
    import subprocess
    import sys

    code = ("import sys, dexcli.graph, dexcli.graph.lint, dexcli.graph.render, dexcli.graph.checks;"
            "bad=[m for m in sys.modules if m.split('.')[0] in ('typer','rich','click') "
            "or m.startswith(('dexcli.engine','dexcli.store','dexcli.cli'))];print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_helpers_return_is_a_decision_only_when_execute_returns_it():
    graph = build_graph(load_bad("helper_returns"))
    assert graph.valid
    assert [(e.target, e.kind) for e in graph.out_edges("Compute")] == [("Decide", "goTo")]
    unknown = [e for e in graph.out_edges("Decide") if e.target is None]
    assert len(unknown) == 1 and "DECISIONS[n]" in unknown[0].detail  # execute returns route's: a "?"


def test_the_payment_example_draws_no_edge_from_its_provider_helper():
    graph = build_graph(load_flow("payment")[0])
    assert set(edges(graph)) == {("START", "AwaitPayment", "start"), ("AwaitPayment", "RecordSettlement", "goTo"),
                                 ("RecordSettlement", "end", "gracefulComplete")}
