"""Render a FlowGraph as plain text (a tree the CLI may colour), Mermaid, Graphviz DOT or JSON.

Every renderer returns a string; none prints. Edge labels are the edge kinds, except that the
text view writes the execute-failure route (its executeFailureStep) as `if execute fails`.
A step with a `wait_for` shows what it waits on (dexcli.graph.waits): the text view lists them
under `wait conditions:`, Mermaid and DOT write it under the step's name, JSON as `waitFor`.
"""

from __future__ import annotations

import json
import re

from dexcli.graph.model import END, START, Edge, FlowGraph, Node

END_GLYPH = "◉"
VALID_BADGE = "✓ Valid"
INVALID_BADGE = "✗ Invalid"
FORMATS = ("text", "mermaid", "dot", "json")


def text_label(edge: Edge) -> str:
    if edge.kind == "start":
        return ""
    if edge.kind == "executeFailure":
        return "if execute fails"
    return edge.kind


def _target_text(graph: FlowGraph, edge: Edge) -> str:
    if edge.target == END:
        return END_GLYPH
    if edge.target is None:
        return f"? ({edge.detail})" if edge.detail else "?"
    node = graph.node(edge.target)
    return node.label if node is not None else edge.target


def _arrow(edge: Edge) -> str:
    label = text_label(edge)
    return f"──{label}──▶ " if label else "──▶ "


def _block(graph: FlowGraph, node_id: str, visited: set[str]) -> list[str]:
    node = graph.node(node_id)
    label = node.label if node is not None else node_id
    if node_id in visited:
        return [f"{label} ↺"]
    visited.add(node_id)
    edges = graph.out_edges(node_id)
    if not edges:
        return [label]
    lines: list[str] = []
    first, rest = edges[0], edges[1:]
    head = f"{label} {_arrow(first)}"
    sub = _sub_block(graph, first, visited)
    lines.append(head + sub[0])
    bar = "│" if rest else " "
    for line in sub[1:]:
        lines.append(bar + " " * (len(head) - 1) + line)
    for i, edge in enumerate(rest):
        last = i == len(rest) - 1
        branch = ("└" if last else "├") + _arrow(edge)
        sub = _sub_block(graph, edge, visited)
        lines.append(branch + sub[0])
        cont = (" " if last else "│") + " " * (len(branch) - 1)
        lines.extend(cont + line for line in sub[1:])
    return lines


def _sub_block(graph: FlowGraph, edge: Edge, visited: set[str]) -> list[str]:
    if edge.target is None or edge.target == END:
        return [_target_text(graph, edge)]
    return _block(graph, edge.target, visited)


def render_text(graph: FlowGraph) -> str:
    """A readable diagram: the verdict badge, the tree from START, unreachable steps, reasons."""
    badge = VALID_BADGE if graph.valid else INVALID_BADGE
    out = [f"{graph.flow_type}   {badge}"]
    visited: set[str] = set()
    if graph.out_edges(START):
        out.extend(_block(graph, START, visited))
    else:
        out.append("START (no start step: the flow starts idle, RPCs start its steps)")
        visited.add(START)
    for title, wanted in (("not reachable from START:", False),
                          ("reached only if a target computed at run time leads here:", None)):
        rest = [n for n in graph.nodes if n.kind == "step" and n.id not in visited and n.reachable is wanted]
        if rest:
            out.append(title)
            for n in rest:
                if n.id not in visited:
                    out.extend("  " + line for line in _block(graph, n.id, visited))
    rest = [n for n in graph.nodes if n.kind == "step" and n.id not in visited]
    if rest:  # e.g. no start step: every step still gets drawn
        out.append("other steps:")
        for n in rest:
            if n.id not in visited:
                out.extend("  " + line for line in _block(graph, n.id, visited))
    out.extend(wait_lines(graph))
    for msg in graph.errors:
        out.append(f"✗ {msg}")
    for msg in graph.warnings:
        out.append(f"! {msg}")
    return "\n".join(out) + "\n"


def wait_lines(graph: FlowGraph) -> list[str]:
    """`wait conditions:` and one line per step with a wait_for: `  Step  waits any_of(...)`."""
    waiting = [n for n in graph.nodes if n.kind == "step" and n.wait_text is not None]
    if not waiting:
        return []
    width = max(len(n.label) for n in waiting)
    return ["wait conditions:"] + [f"  {n.label.ljust(width)}  {n.wait_text}" for n in waiting]


def node_label(node: Node) -> str:
    """A box's label in mermaid and dot: the step, and under it what it waits on."""
    return node.label if node.wait_text is None else f"{node.label}\n{node.wait_text}"


# --------------------------------------------------------------------------- mermaid
def _mermaid_id(node_id: str) -> str:
    return "s_" + re.sub(r"[^A-Za-z0-9_]", "_", node_id)


def _q(text: str) -> str:
    return text.replace('"', "#quot;")


def render_mermaid(graph: FlowGraph) -> str:
    ids: dict[str, str] = {START: "start_", END: "end_"}
    lines = [f"%% {graph.flow_type}: {graph.verdict}", "flowchart LR"]
    for msg in graph.errors:
        lines.append(f"%% error: {msg}")
    for msg in graph.warnings:
        lines.append(f"%% warning: {msg}")
    for node in graph.nodes:
        if node.kind == "start":
            lines.append(f'    {ids[START]}(["START"])')
        elif node.kind == "end":
            lines.append(f'    {ids[END]}((("end")))')
        else:
            mid = _mermaid_id(node.id)
            n = 2
            while mid in ids.values():
                mid, n = f"{_mermaid_id(node.id)}_{n}", n + 1
            ids[node.id] = mid
            label = _q(node_label(node)).replace("\n", "<br/>")
            lines.append(f'    {mid}["{label}"]')
    unknown = 0
    for edge in graph.edges:
        src = ids.get(edge.source, _mermaid_id(edge.source))
        if edge.target is None:
            unknown += 1
            dst = f"unknown_{unknown}"
            lines.append(f'    {dst}{{{{"? {_q(edge.detail or "unresolved")}"}}}}')
        else:
            dst = ids.get(edge.target, _mermaid_id(edge.target))
        arrow = "-.->" if edge.kind == "executeFailure" or not edge.resolved else "-->"
        lines.append(f'    {src} {arrow}|"{edge.kind}"| {dst}')
    unreachable = [ids[n.id] for n in graph.nodes if n.kind == "step" and n.reachable is not True]
    if unreachable:
        lines.append("    classDef unreachable stroke-dasharray: 5 5,color:#888")
        lines.append(f"    class {','.join(unreachable)} unreachable")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- dot
def _dq(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_dot(graph: FlowGraph) -> str:
    title = f"{graph.flow_type} ({graph.verdict})"
    lines = [f"digraph {_dq(graph.flow_type)} {{", "  rankdir=LR;",
             f"  label={_dq(title)}; labelloc=t;", "  node [fontname=Helvetica];",
             "  edge [fontname=Helvetica, fontsize=10];"]
    for node in graph.nodes:
        if node.kind == "start":
            lines.append(f'  {_dq(START)} [shape=circle, label="START"];')
        elif node.kind == "end":
            lines.append(f'  {_dq(END)} [shape=doublecircle, label="end"];')
        else:
            style = ", style=dashed" if node.reachable is not True else ""
            label = _dq(node_label(node)).replace("\n", "\\n")  # DOT's line break inside a label
            lines.append(f"  {_dq(node.id)} [shape=box, label={label}{style}];")
    unknown = 0
    for edge in graph.edges:
        if edge.target is None:
            unknown += 1
            dst = f"?{unknown}"
            lines.append(f"  {_dq(dst)} [shape=diamond, label={_dq('? ' + (edge.detail or 'unresolved'))}];")
        else:
            dst = edge.target
        style = ", style=dashed" if edge.kind == "executeFailure" or not edge.resolved else ""
        lines.append(f"  {_dq(edge.source)} -> {_dq(dst)} [label={_dq(edge.kind)}{style}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_json(graph: FlowGraph) -> str:
    return json.dumps(graph.to_dict(), indent=2) + "\n"


def render(graph: FlowGraph, fmt: str = "text") -> str:
    renderers = {"text": render_text, "mermaid": render_mermaid, "dot": render_dot, "json": render_json}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    return renderers[fmt](graph)
