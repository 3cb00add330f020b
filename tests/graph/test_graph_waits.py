"""`dex graph` shows what each step's wait_for waits on (read from its source), in text, Mermaid,
DOT and `--json` (`waitFor`); `dex lint`'s timer-self-loop reads the same wait."""

from __future__ import annotations

import json

import pytest

from dexcli.graph.lint import lint_flow
from dexcli.graph.model import build_graph
from dexcli.graph.render import render, render_dot, render_mermaid, render_text
from dexcli_flows.approval import ApprovalFlow
from dexcli_flows.payment import PaymentFlow
from tests.engine.wait_flows import ChannelFlow
from tests.graph.graph_helpers import expected_markers, load_bad
from tests.graph.wait_shapes import ShapesFlow

APPROVAL_WAIT = "waits any_of(decisions.for_one [decision], Timer (duration at run time) [expire])"
STEP_KEYS = {"id", "kind", "label", "class", "file", "line", "start", "reachable", "sourceAvailable", "waitFor"}


def test_the_approval_graph_shows_what_its_step_waits_on() -> None:
    lines = render_text(build_graph(ApprovalFlow())).splitlines()
    assert lines == ["ApprovalFlow   ✓ Valid", "START ──▶ AwaitDecision ──gracefulComplete──▶ ◉",
                     "wait conditions:", f"  AwaitDecision  {APPROVAL_WAIT}"]


def test_the_approval_json_has_wait_for_and_keeps_every_other_key() -> None:
    data = json.loads(render(build_graph(ApprovalFlow()), "json"))
    assert data["verdict"] == "Valid" and data["errors"] == [] and data["warnings"] == []
    step = next(n for n in data["nodes"] if n["kind"] == "step")
    assert set(step) == STEP_KEYS and step["start"] is True and step["reachable"] is True
    wait = step["waitFor"]
    assert wait["text"] == APPROVAL_WAIT.removeprefix("waits ") and wait["computed"] is False
    assert wait["file"].endswith("approval.py") and isinstance(wait["line"], int)
    [shape] = wait["waits"]
    assert shape["kind"] == "any_of"
    assert shape["conditions"] == [
        {"kind": "channel", "text": "decisions.for_one [decision]", "conditionId": "decision",
         "channel": "decisions", "instance": None, "call": "for_one", "atLeast": 1, "atMost": 1},
        {"kind": "timer", "text": "Timer (duration at run time) [expire]", "conditionId": "expire",
         "duration": None},
    ]
    assert [n for n in data["nodes"] if n["kind"] != "step"] == [
        {"id": "START", "kind": "start", "label": "START"}, {"id": "end", "kind": "end", "label": "end"}]
    assert [(e["from"], e["to"], e["kind"], e["resolved"]) for e in data["edges"]] == [
        ("START", "AwaitDecision", "start", True), ("AwaitDecision", "end", "gracefulComplete", True)]


def test_the_payment_json_stays_valid_and_its_steps_wait_on_nothing() -> None:
    graph = build_graph(PaymentFlow())
    data = json.loads(render(graph, "json"))
    steps = [n for n in data["nodes"] if n["kind"] == "step"]
    assert data["verdict"] == "Valid" and steps
    assert all(set(n) == STEP_KEYS and n["waitFor"] is None for n in steps)
    assert "wait conditions:" not in render_text(graph) and "waits" not in render_mermaid(graph)


def test_every_kind_of_condition_with_constants_read_and_the_rest_marked() -> None:
    graph = build_graph(ShapesFlow())
    assert render_text(graph).splitlines()[5:8] == [
        "wait conditions:",
        "  Shapes    waits all_of(orders['eu'].for_n(2) [eu], orders[input].at_least(1), replies.for_range(2..), "
        "replies.at_most(?), Timer 24 h 30 min [?], SubFlow Child)",
        "  Computed  waits (computed at run time)",
    ]
    shapes = graph.node("Shapes")
    assert shapes is not None and shapes.wait is not None
    conds = {c.text: c for c in shapes.wait.waits[0].conditions}
    eu = conds["orders['eu'].for_n(2) [eu]"]
    assert (eu.channel, eu.instance, eu.at_least, eu.at_most, eu.condition_id) == ("orders", "eu", 2, 2, "eu")
    assert conds["orders[input].at_least(1)"].instance == "input"
    assert conds["replies.at_most(?)"].at_most is None  # counted at run time
    assert conds["Timer 24 h 30 min [?]"].duration == 88200.0
    computed = graph.node("Computed")
    assert computed is not None and computed.wait is not None
    assert computed.wait.computed and computed.wait.waits == ()
    assert computed.to_dict()["waitFor"]["text"] == "(computed at run time)"


def test_every_wait_a_step_may_return_is_shown_in_source_order() -> None:
    either = build_graph(ShapesFlow()).node("Either")
    assert either is not None and either.wait_text == "waits skip_immediately() or any_of(? *conds)"
    collect = build_graph(ChannelFlow()).node("Collect")  # returns {name: Wait, ...}[input]
    assert collect is not None and collect.wait is not None and not collect.wait.computed
    assert [w.kind for w in collect.wait.waits] == ["until"] * 4 + ["any_combination_of"]
    assert collect.wait.waits[-1].text == \
        "any_combination_of(of(replies.for_n(3) [three]), of(replies.for_one [one], Timer 5 s [t]))"


def test_mermaid_and_dot_write_the_wait_under_the_step() -> None:
    graph = build_graph(ApprovalFlow())
    assert f'    s_AwaitDecision["AwaitDecision<br/>{APPROVAL_WAIT}"]' in render_mermaid(graph)
    assert f'  "AwaitDecision" [shape=box, label="AwaitDecision\\n{APPROVAL_WAIT}"];' in render_dot(graph)


@pytest.mark.parametrize("flow", [ApprovalFlow, PaymentFlow])
def test_the_wait_for_examples_have_no_lint_findings(flow: type) -> None:
    report = lint_flow(flow())
    assert report.findings == [] and report.graph.valid


def test_timer_self_loop_through_wait_for_shapes_and_not_a_reminder_loop() -> None:
    report = lint_flow(load_bad("timer_poll"))
    assert {(f.severity, f.rule, f.line) for f in report.findings} == expected_markers("timer_poll")
    assert {f.step for f in report.findings} == {"PollTwice", "PollViaHelper"}  # not RemindOrReply
    graph = report.graph
    assert [n.wait_text for n in graph.nodes if n.kind == "step"] == [
        "waits any_of(Timer 30 s [fast], Timer 2 min)", "waits any_of(replies.for_one [reply], Timer 1 h)",
        "waits until(Timer 5 min [tick])"]
