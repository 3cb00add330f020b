"""`dex lint`: the definition errors, the seed's polling anti-patterns and the progress-reporting
mistakes (CODE_RULES), each with file:line.

Rules (ids are what `# dex: ignore[rule-id]` takes; a bare `# dex: ignore` silences every rule
on that line). Errors (the flow is Invalid) cannot be silenced. timer-self-loop is also checked
on what a run did (`dex lint --flow-id`, dexcli.graph.run_lint).
"""

from __future__ import annotations

import linecache
import os
import re
from dataclasses import asdict, dataclass
from typing import Any

from dexcli.graph.lint_rules import RULE_FUNCS, StepFacts
from dexcli.graph.model import FlowGraph, Problem, build_graph

SEED = {
    "timer-self-loop": "A Step waits on a Timer and then moves to itself for the next poll.",
    "retry-as-poll": 'Using the retry policy, backoff or RetryAfter as the polling loop, returning '
                     '"not ready" as an error.',
    "loop-without-heartbeat": "Looping for a long time without ever recording a heartbeat or writing progress.",
    "call-without-timeout": "An external call without its own timeout.",
    "hand-written-deadline": "A hand-written deadline that repeats what ExecuteMethodTimeout or "
                             "TotalDuration already provide.",
    "heartbeat-window": "Every round must fit inside the heartbeat window: "
                        "interval + call timeout <= HeartbeatTimeout - 10s.",
    "lock-held-while-polling": "Do not hold ExecuteLockAttributes for the whole wait.",
    "page-token-run": "Iterating page by page by passing a page token to a new run.",
}
# Mistakes in how a step reports progress (no seed to quote): each fails or silently drops output.
CODE_RULES = ("sync-context-heartbeat", "unyielded-frame")
RULES = tuple(SEED) + CODE_RULES
FIX = {
    "sync-context-heartbeat": "sync steps heartbeat with `yield heartbeat(value)` (or make the step async)",
    "unyielded-frame": "yield it in a generator step (`yield heartbeat(value)`, `yield stream.write(context, "
                       "value)`); in an async step, `await context.heartbeat(value)`",
    "timer-self-loop": "poll inside one execute: call, sleep, heartbeat, until a terminal state",
    "retry-as-poll": '"not ready" is a normal branch of the loop, never an error',
    "loop-without-heartbeat": "write a Stream message when the status changes, otherwise record a heartbeat",
    "call-without-timeout": "wrap it in asyncio.wait_for(..., timeout) or async with asyncio.timeout(...)",
    "hand-written-deadline": "let the step options bound the wait; compute no deadline in code",
    "heartbeat-window": "shorten the interval or the call timeout, or raise heartbeat_timeout",
    "lock-held-while-polling": "return the result and commit under the lock in a short step after it",
    "page-token-run": "iterate the pages in one step's loop, checkpointing the page token as its heartbeat",
}

_IGNORE = re.compile(r"#\s*dex:\s*ignore(?:\[([^\]]*)\])?")


@dataclass
class Finding:
    rule: str
    severity: str  # error | warning
    file: str | None
    line: int | None
    message: str
    flow: str
    step: str | None = None
    run: str | None = None  # the flow id, for a finding in what a run did (dexcli.graph.run_lint)

    def location(self) -> str:
        if not self.file:
            return f"flow {self.run}" if self.run else "?"
        return f"{short_path(self.file)}:{self.line}" if self.line else short_path(self.file)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["file"] = short_path(self.file) if self.file else None
        if self.run is None:
            del d["run"]
        return d


@dataclass
class LintReport:
    flow: str
    graph: FlowGraph
    findings: list[Finding]
    suppressed: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def exit_code(self, exit_zero: bool = False) -> int:
        # like ruff and flake8: any finding fails a CI step unless the caller opts out
        return 1 if self.findings and not exit_zero else 0


def short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def ignored(file: str | None, line: int | None, rule: str) -> bool:
    if not file or not line:
        return False
    m = _IGNORE.search(linecache.getline(file, line))
    if m is None:
        return False
    if m.group(1) is None:
        return True
    return rule in {r.strip() for r in m.group(1).split(",")}


# --------------------------------------------------------------------------- driver
def _problem_finding(flow_type: str, p: Problem) -> Finding:
    return Finding(p.rule, p.severity, p.file, p.line, p.message, flow_type, p.step)


def lint_graph_and_flow(flow: Any, graph: FlowGraph | None = None, portable: bool = False) -> LintReport:
    from dexcli.sdk.flow import Step

    graph = graph or build_graph(flow)
    findings = [_problem_finding(graph.flow_type, p) for p in graph.problems]
    steps: list[tuple[str, Any]] = []
    try:
        for s in flow.get_steps().all_steps():
            if isinstance(s, Step):
                steps.append((s.get_step_type(), s))
    except Exception:
        steps = []
    for st, inst in steps:
        try:
            step = StepFacts(st, inst, steps)
            if not step.source.available:
                continue
            for rule in RULE_FUNCS:
                for rid, file, line, text in rule(step):
                    seed = f" Anti-pattern: \"{SEED[rid]}\"" if rid in SEED else ""
                    msg = f"{text}.{seed} Fix: {FIX[rid]}."
                    findings.append(Finding(rid, "warning", file, line, msg, graph.flow_type, st))
        except Exception:  # never let an analysis bug hide the other findings
            continue
    if portable:  # dexcli.graph.portability: what would not carry over to a Dex server
        from dexcli.graph.portability import portability_hits

        findings.extend(Finding(rid, "warning", file, line, msg, graph.flow_type, st)
                        for rid, file, line, msg, st in portability_hits(flow, steps))
    kept: list[Finding] = []
    suppressed = 0
    seen: set[tuple[str, str | None, int | None, str]] = set()
    for f in findings:
        key = (f.rule, f.file, f.line, f.message)
        if key in seen:
            continue
        seen.add(key)
        if f.severity == "warning" and ignored(f.file, f.line, f.rule):
            suppressed += 1
            continue
        kept.append(f)
    kept.sort(key=lambda f: (f.severity != "error", f.file or "", f.line or 0, f.rule))
    return LintReport(graph.flow_type, graph, kept, suppressed)


def lint_flow(flow: Any, portable: bool = False) -> LintReport:
    """Every finding for one flow instance: definition errors, warnings and the 8 rules (and,
    `portable`, the portability/* rules)."""
    return lint_graph_and_flow(flow, portable=portable)


def format_finding(f: Finding) -> str:
    return f"{f.location()}: {f.severity} [{f.rule}] {f.message}"
