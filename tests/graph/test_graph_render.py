from __future__ import annotations

import json
import re

import pytest

from dexcli.cli.loader import load_flow
from dexcli.graph import build_graph
from dexcli.graph.render import render, render_dot, render_json, render_mermaid, render_text
from tests.graph.graph_helpers import load_bad
from tests.graph.test_graph_model import POLLING_EDGES

MERMAID_NODE = re.compile(r'^    (\w+)(\(\["(.*)"\]\)|\["(.*)"\]|\(\(\("(.*)"\)\)\)|\{\{"(.*)"\}\})$')
MERMAID_EDGE = re.compile(r'^    (\w+) (-->|-\.->)\|"(\w+)"\| (\w+)$')
DOT_NODE = re.compile(r'^  "((?:[^"\\]|\\.)*)" \[(.*)\];$')
DOT_EDGE = re.compile(r'^  "((?:[^"\\]|\\.)*)" -> "((?:[^"\\]|\\.)*)" \[label="(\w+)"(, style=dashed)?\];$')


@pytest.fixture(scope="module")
def polling():
    return build_graph(load_flow("polling")[0])


def parse_mermaid(text):
    lines = text.splitlines()
    assert "flowchart LR" in lines
    nodes, edges = {}, []
    for line in lines:
        if line.startswith("%%") or line == "flowchart LR" or "classDef" in line or line.startswith("    class "):
            continue
        if m := MERMAID_EDGE.match(line):
            edges.append((m.group(1), m.group(4), m.group(3), m.group(2)))
        elif m := MERMAID_NODE.match(line):
            nodes[m.group(1)] = next(g for g in m.groups()[2:] if g is not None)
        else:
            pytest.fail(f"unparsed mermaid line: {line!r}")
    return nodes, edges


def test_mermaid_structure(polling):
    text = render_mermaid(polling)
    assert text.splitlines()[0] == "%% PollingFlow: Valid"
    nodes, edges = parse_mermaid(text)
    assert set(nodes.values()) == {"START", "StartJob", "AwaitJob", "RecordJobWaitFailure", "end"}
    assert all(src in nodes and dst in nodes for src, dst, _, _ in edges)  # every edge uses declared nodes
    labelled = {(nodes[s], nodes[d], k) for s, d, k, _ in edges}
    assert labelled == {(s, "end" if d == "end" else d, k) for s, d, k in POLLING_EDGES}
    assert len(edges) == 6
    dashed = [k for _, _, k, arrow in edges if arrow == "-.->"]
    assert dashed == ["executeFailure"]
    assert "end" not in nodes  # `end` is a mermaid keyword; never used as an id


def test_dot_structure(polling):
    text = render_dot(polling)
    lines = text.splitlines()
    assert lines[0] == 'digraph "PollingFlow" {' and lines[-1] == "}"
    assert sum(line.count("{") for line in lines) == sum(line.count("}") for line in lines)
    nodes, edges = set(), set()
    for line in lines[1:-1]:
        if m := DOT_EDGE.match(line):
            edges.add((m.group(1), m.group(2), m.group(3)))
        elif m := DOT_NODE.match(line):
            nodes.add(m.group(1))
        else:
            assert re.match(r"^  (rankdir|label|node|edge)\b", line), line
    assert edges == POLLING_EDGES
    assert nodes == {"START", "StartJob", "AwaitJob", "RecordJobWaitFailure", "end"}


def test_json_lists_nodes_and_edges(polling):
    data = json.loads(render_json(polling))
    assert data["verdict"] == "Valid" and data["valid"] is True and data["errors"] == []
    assert {(e["from"], e["to"], e["kind"]) for e in data["edges"]} == POLLING_EDGES
    assert [n["id"] for n in data["nodes"]] == ["START", "StartJob", "AwaitJob", "RecordJobWaitFailure", "end"]


def test_text_diagram_matches_the_documentation_picture(polling):
    text = render_text(polling)
    assert text.splitlines() == [
        "PollingFlow   ✓ Valid",
        "START ──▶ StartJob ──goTo──▶ AwaitJob ──gracefulComplete──▶ ◉",
        "                             ├──forceFail──▶ ◉",
        "                             └──if execute fails──▶ RecordJobWaitFailure ──forceFail──▶ ◉",
    ]
    # the branches hang exactly under AwaitJob
    lines = text.splitlines()
    assert lines[2].index("├") == lines[1].index("AwaitJob") == lines[3].index("└")


def test_invalid_flow_renders_in_every_format_with_its_reason():
    graph = build_graph(load_bad("unknown_target"))
    text = render_text(graph)
    assert "✗ Invalid" in text.splitlines()[0]
    assert "? (not a registered step: Forgotten is not registered)" in text
    assert any(line.startswith("✗ flow UnknownTargetFlow, step Begin") for line in text.splitlines())
    nodes, edges = parse_mermaid(render_mermaid(graph))
    assert ("s_Begin", "unknown_1", "goTo", "-.->") in edges
    assert "%% error: flow UnknownTargetFlow" in render_mermaid(graph)
    assert json.loads(render(graph, "json"))["verdict"] == "Invalid"
    assert '"Begin" -> "?1" [label="goTo", style=dashed];' in render_dot(graph)


def test_runtime_target_and_unknown_reachability_in_text():
    text = render_text(build_graph(load_bad("runtime_target")))
    assert "START ──▶ Route ──goTo──▶ ? (target self.pick(n) is computed at run time)" in text
    assert "reached only if a target computed at run time leads here:" in text
    assert "  Small ──forceComplete──▶ ◉" in text and "  Large ──deadEnd──▶ ◉" in text


def test_unreachable_and_self_loop_in_text():
    text = render_text(build_graph(load_bad("unreachable")))
    assert "not reachable from START:\n  Orphan ──gracefulComplete──▶ ◉" in text
    text = render_text(build_graph(load_bad("timer_self_loop")))
    assert "└──goTo──▶ PollJob ↺" in text


def test_dot_quotes_awkward_names():
    from dexcli.graph.model import Edge, FlowGraph, Node

    graph = FlowGraph('we"ird', "X", [Node("START", "start", "START"), Node('a"b', "step", 'a"b', is_start=True)],
                      [Edge("START", 'a"b', "start")])
    assert '"START" -> "a\\"b" [label="start"];' in render_dot(graph)
    nodes, edges = parse_mermaid(render_mermaid(graph))
    assert nodes["s_a_b"] == "a#quot;b"


def test_unknown_format_is_rejected(polling):
    with pytest.raises(ValueError):
        render(polling, "svg")
