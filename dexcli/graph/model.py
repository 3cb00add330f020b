"""The definition graph of one flow: nodes, edges, reachability and the Valid/Invalid verdict.

`build_graph(flow)` works for invalid flows too: it never requires registration to succeed,
it shows the registry's reasons in the verdict.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Any

from dexcli.graph.evaluate import resolve_target
from dexcli.graph.static import Site, class_location, class_methods, step_source
from dexcli.graph.waits import WaitInfo, read_wait

START = "START"
END = "end"

EDGE_KINDS = ("start", "goTo", "gracefulComplete", "forceComplete", "forceFail", "deadEnd", "executeFailure")
TERMINAL_KINDS = ("gracefulComplete", "forceComplete", "forceFail", "deadEnd")


@dataclass
class Node:
    id: str
    kind: str  # start | step | end
    label: str
    class_name: str | None = None
    file: str | None = None
    line: int | None = None
    is_start: bool = False
    reachable: bool | None = True  # None: only a target computed at run time could reach it
    source_available: bool = True
    wait: WaitInfo | None = None  # what its wait_for waits on; None: it has no wait_for

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "kind": self.kind, "label": self.label}
        if self.kind == "step":
            d.update(
                {"class": self.class_name, "file": self.file, "line": self.line, "start": self.is_start,
                 "reachable": self.reachable, "sourceAvailable": self.source_available,
                 "waitFor": self.wait.to_dict() if self.wait is not None else None}
            )
        return d

    @property
    def wait_text(self) -> str | None:
        """`waits any_of(...)` for a step with a wait_for, else None."""
        return f"waits {self.wait.text}" if self.wait is not None else None


@dataclass
class Edge:
    source: str
    target: str | None  # None: not resolvable statically, or not a registered step
    kind: str
    resolved: bool = True
    detail: str = ""  # why unresolved / what the missing target is
    file: str | None = None
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"from": self.source, "to": self.target, "kind": self.kind, "resolved": self.resolved}
        if self.detail:
            d["detail"] = self.detail
        if self.file:
            d["file"] = self.file
        if self.line:
            d["line"] = self.line
        return d


@dataclass
class Problem:
    """An error or warning with its location, as the graph and lint both need it."""

    severity: str  # error | warning
    rule: str
    message: str
    step: str | None = None
    file: str | None = None
    line: int | None = None


@dataclass
class FlowGraph:
    flow_type: str
    flow_class: str
    nodes: list[Node]
    edges: list[Edge]
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        return [p.message for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[str]:
        return [p.message for p in self.problems if p.severity == "warning"]

    @property
    def valid(self) -> bool:
        return not self.errors

    @property
    def verdict(self) -> str:
        return "Valid" if self.valid else "Invalid"

    def node(self, node_id: str) -> Node | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def out_edges(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id]

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow_type,
            "class": self.flow_class,
            "verdict": self.verdict,
            "valid": self.valid,
            "errors": self.errors,
            "warnings": self.warnings,
            "nodes": [n.to_dict() for n in self.nodes],
            "edges": [e.to_dict() for e in self.edges],
        }


# --------------------------------------------------------------------------- analysis core
@dataclass
class _Analysis:
    nodes: list[Node]
    edges: list[Edge]
    problems: list[Problem]


def _safe_step_type(step: Any) -> str:
    try:
        st = step.get_step_type()
        return st if isinstance(st, str) and st else type(step).__name__
    except Exception:
        return type(step).__name__


def _execute_failure_target(step: Any) -> tuple[bool, Any]:
    try:
        opts = step.get_step_options()
    except Exception:
        return False, None
    target = getattr(opts, "execute_failure_step", None) if opts is not None else None
    return target is not None, target


def _match_step(target: Any, steps: list[tuple[str, Any]]) -> str | None:
    if isinstance(target, str):
        return target if any(st == target for st, _ in steps) else None
    for st, inst in steps:
        if target is inst or target is type(inst):
            return st
    return None


_Key = tuple[str | None, str, str]  # (target, kind, text): one edge per distinct key and step


def analyze(flow_type: str, steps: list[tuple[str, Any]], start: Any | None) -> _Analysis:
    """Nodes, edges and static problems of a flow given its (step_type, instance) list."""
    step_nodes = _step_nodes(steps, start)
    nodes: list[Node] = [Node(START, "start", START)] + [node for node, _ in step_nodes]
    edges: list[Edge] = []
    problems: list[Problem] = []
    registered = [(node.id, inst) for node, inst in step_nodes]
    for node, inst in step_nodes:
        if node.is_start:
            edges.insert(0, Edge(START, node.id, "start"))
        edges.extend(_site_edges(flow_type, node, inst, registered, problems))
        failure = _failure_edge(node, inst, registered)
        if failure is not None:
            edges.append(failure)
    _reachability(flow_type, nodes, edges, problems)
    return _Analysis(nodes, edges, problems)


def _step_nodes(steps: list[tuple[str, Any]], start: Any | None) -> list[tuple[Node, Any]]:
    """One node per step, with a unique id (a repeated step type gets `#2`, `#3`, ...)."""
    ids: set[str] = set()
    out: list[tuple[Node, Any]] = []
    for st, inst in steps:
        node_id = st
        n = 2
        while node_id in ids or node_id in (START, END):
            node_id, n = f"{st}#{n}", n + 1
        ids.add(node_id)
        file, line = class_location(type(inst))
        node = Node(node_id, "step", st, type(inst).__name__, file, line, is_start=inst is start)
        node.wait = _read_wait(inst)
        out.append((node, inst))
    return out


def _read_wait(inst: Any) -> WaitInfo | None:
    try:
        return read_wait(inst)
    except Exception:  # an analysis bug must not hide the graph: say we could not read it
        return WaitInfo((), True, None, None)


def _site_edges(flow_type: str, node: Node, inst: Any, registered: list[tuple[str, Any]],
                problems: list[Problem]) -> list[Edge]:
    """The decision edges of one step, read from its source; a goTo to no step is a problem."""
    from dexcli.sdk.flow import Step

    src = step_source(type(inst)) if isinstance(inst, Step) else None
    if src is None or not src.available:
        node.source_available = False
        return [Edge(node.id, None, "goTo", False, "source not available: targets unknown", node.file, node.line)]
    edges: dict[_Key, Edge] = {}
    for site in src.sites:
        problem: Problem | None = None
        if site.kind == "unknown":
            key: _Key = (None, "goTo", site.text)
            edge = Edge(node.id, None, "goTo", False, f"decision computed at run time: {site.text}",
                        site.file, site.line)
        elif site.kind != "goTo":
            key, edge = (END, site.kind, ""), Edge(node.id, END, site.kind, True, "", site.file, site.line)
        else:
            key, edge, problem = _goto_edge(flow_type, node, site, inst, registered)
        if key in edges:
            continue
        edges[key] = edge
        if problem is not None:
            problems.append(problem)
    return list(edges.values())


def _goto_edge(flow_type: str, node: Node, site: Site, inst: Any,
               registered: list[tuple[str, Any]]) -> tuple[_Key, Edge, Problem | None]:
    """The edge of one goTo site, and the error if its target is not a registered step."""
    res = resolve_target(site, inst, registered)
    if res.status == "step":
        return (res.step_type, "goTo", ""), Edge(node.id, res.step_type, "goTo", True, "", site.file,
                                                 site.line), None
    key: _Key = (None, "goTo", site.text)
    if res.status == "runtime":
        return key, Edge(node.id, None, "goTo", False, f"target {res.detail}", site.file, site.line), None
    where = f"flow {flow_type}, step {node.label}"
    loc = f" at {_short(site.file)}:{site.line}"
    if res.status == "missing":
        msg = (f"{where}: {site.text}{loc} targets a step that is not registered in "
               f"{flow_type} ({res.detail}); add it to get_steps()")
    else:
        msg = f"{where}: {site.text}{loc} does not target a step ({res.detail})"
    edge = Edge(node.id, None, "goTo", False, f"not a registered step: {res.detail}", site.file, site.line)
    return key, edge, Problem("error", "unknown-target", msg, node.label, site.file, site.line)


def _failure_edge(node: Node, inst: Any, registered: list[tuple[str, Any]]) -> Edge | None:
    """The executeFailure edge of a step whose options route failures to another step."""
    has_route, target = _execute_failure_target(inst)
    if not has_route:
        return None
    tid = _match_step(target, registered)
    line = _options_line(inst)
    if tid is not None:
        return Edge(node.id, tid, "executeFailure", True, "", node.file, line)
    name = target if isinstance(target, str) else getattr(target, "__name__", type(target).__name__)
    return Edge(node.id, None, "executeFailure", False, f"not a registered step: {name}", node.file, line)


def _options_line(inst: object) -> int | None:
    cls: type = type(inst)
    fi = class_methods(cls).get("get_step_options")
    if fi is None:
        return None
    for n in ast.walk(fi.node):
        if isinstance(n, ast.Attribute) and n.attr == "on_execute_failure_proceed_to":
            return n.lineno
    return fi.node.lineno


def _short(path: str | None) -> str:
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _reachability(flow_type: str, nodes: list[Node], edges: list[Edge], problems: list[Problem]) -> None:
    if not any(e.kind == "start" for e in edges):
        return  # no start step: the registry reports that; steps may be scheduled by RPCs
    adj: dict[str, list[str]] = {}
    for e in edges:
        if e.target is not None and e.kind in ("start", "goTo", "executeFailure"):
            adj.setdefault(e.source, []).append(e.target)
    seen = {START}
    todo = [START]
    while todo:
        cur = todo.pop()
        for nxt in adj.get(cur, []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    uncertain = [e.source for e in edges if not e.resolved and e.kind == "goTo" and e.source in seen]
    for node in nodes:
        if node.kind != "step" or node.id in seen:
            continue
        if uncertain:  # a run-time target may lead there: say "unknown", do not guess
            node.reachable = None
            continue
        node.reachable = False
        why = "no start edge, goTo or execute-failure route leads to it"
        problems.append(Problem("warning", "unreachable-step",
                                f"flow {flow_type}, step {node.label}: unreachable: {why}",
                                node.label, node.file, node.line))


# --------------------------------------------------------------------------- from a flow
def _flow_steps(flow: Any, problems: list[Problem]) -> tuple[list[tuple[str, Any]], Any]:
    flow_type = _flow_type(flow)
    try:
        step_list = flow.get_steps()
        all_steps = step_list.all_steps()
        start = step_list.start
    except Exception as exc:
        problems.append(Problem("error", "invalid-definition",
                                f"flow {flow_type}: get_steps raised {type(exc).__name__}: {exc}"))
        return [], None
    return [(_safe_step_type(s), s) for s in all_steps], start


def _flow_type(flow: Any) -> str:
    try:
        ft = flow.get_flow_type()
        return ft if isinstance(ft, str) else type(flow).__name__
    except Exception:
        return type(flow).__name__


_LOCATORS = (re.compile(r"step (\S+?):"), re.compile(r"duplicate step class (\w+)"),
             re.compile(r"duplicate step type (\S+)"))


def build_graph(flow: Any) -> FlowGraph:
    """The definition graph of a flow instance, with the registry's verdict (never raises on an
    invalid flow: the reasons become errors of the graph)."""
    from dexcli.sdk.errors import FlowDefinitionError
    from dexcli.sdk.flow import Step
    from dexcli.sdk.registry import build_definition

    if isinstance(flow, type):
        try:
            flow = flow()
        except Exception as exc:
            raise FlowDefinitionError(f"{flow.__name__}: cannot create the flow ({exc})") from exc
    problems: list[Problem] = []
    steps, start = _flow_steps(flow, problems)
    flow_type = _flow_type(flow)
    analysis = analyze(flow_type, [(st, s) for st, s in steps if isinstance(s, Step)], start)
    registry_errors: list[str] = []
    registry_warnings: list[str] = []
    if not problems:
        try:
            definition = build_definition(flow)  # no checks=: `analysis` has the static problems
            registry_warnings = list(definition.warnings)
        except FlowDefinitionError as exc:
            registry_errors = list(exc.problems)
        except Exception as exc:  # user code raised while registering
            registry_errors = [f"flow {flow_type}: registration raised {type(exc).__name__}: {exc}"]
    by_label = {n.label: n for n in analysis.nodes if n.kind == "step"}
    by_class = {n.class_name: n for n in analysis.nodes if n.kind == "step" and n.class_name}
    flow_file, flow_line = class_location(type(flow))
    for msg in registry_errors:
        if any(p.message == msg for p in analysis.problems):
            continue
        node = None
        for pattern in _LOCATORS:
            m = pattern.search(msg)
            if m:
                node = by_label.get(m.group(1)) or by_class.get(m.group(1))
                if node is not None:
                    break
        problems.append(Problem("error", "invalid-definition", msg, node.label if node else None,
                                node.file if node else flow_file, node.line if node else flow_line))
    problems.extend(analysis.problems)
    known = {p.message for p in problems}
    for msg in registry_warnings:
        if msg not in known:
            problems.append(Problem("warning", "definition-warning", msg, None, flow_file, flow_line))
    nodes = list(analysis.nodes)
    if any(e.target == END for e in analysis.edges):
        nodes.append(Node(END, "end", END))
    return FlowGraph(flow_type, type(flow).__name__, nodes, analysis.edges, problems)
