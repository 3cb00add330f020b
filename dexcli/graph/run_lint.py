"""`dex lint --flow-id ID`: the seed's timer-self-loop anti-pattern, found in what a run did.

A step execution whose persisted Wait held only Timers, and whose execute moved to a new
execution of the same step type, polled by time. Three such moves in a row (MIN_MOVES) are
reported once per step type, with the count, the executions and the timers' interval.

It reads step executions as the store hands them out (any record with the fields of
`StepRun`) and the Wait JSON the engine persists (dexcli/engine/waits.py: `conditions[]`, each
with `kind` "timer" or "channel" and a timer's `duration` in seconds). Runs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from dexcli.graph.evaluate import resolve_target
from dexcli.graph.lint import FIX, SEED, Finding, ignored
from dexcli.graph.static import class_location, step_source
from dexcli.graph.waits import format_duration

MIN_MOVES = 3
RULE = "timer-self-loop"


class StepRun(Protocol):
    """The fields of a step execution this check reads (dexcli.store.StepRecord has them)."""

    @property
    def step_execution_id(self) -> str: ...
    @property
    def step_type(self) -> str: ...
    @property
    def from_step_execution_id(self) -> str: ...
    @property
    def wait(self) -> str | None: ...


@dataclass(frozen=True)
class TimerLoop:
    """Consecutive executions of one step type, each waiting on Timers only, then moving to the next."""

    step_type: str
    executions: tuple[str, ...]  # the chain, first to last
    interval: float | None  # the timers' duration (seconds) when every wait used the same one

    @property
    def moves(self) -> int:
        return len(self.executions) - 1


def poll_interval(wait_json: str | None) -> float | None:
    """How long a persisted Wait of Timers only waited (all_of: its longest timer, else its
    shortest), in seconds; None when it is not a Wait of Timers only."""
    if not wait_json:
        return None
    try:
        wait: dict[str, Any] = json.loads(wait_json)
        conds = wait["conditions"]
        if not conds or any(c["kind"] != "timer" for c in conds):
            return None
        durations = [float(c["duration"]) for c in conds]
    except (ValueError, KeyError, TypeError):
        return None
    return max(durations) if wait.get("kind") == "all_of" else min(durations)


def timer_self_loops(steps: Iterable[StepRun], min_moves: int = MIN_MOVES) -> list[TimerLoop]:
    """The longest chain per step type of timer-only waits followed by a move to the same step type,
    when it has at least `min_moves` moves."""
    steps = list(steps)
    polled = {s.step_execution_id: poll_interval(s.wait) for s in steps}
    by_id = {s.step_execution_id: s for s in steps}
    nxt: dict[str, str] = {}  # an execution that polled -> the execution of itself it moved to
    for s in steps:
        parent = by_id.get(s.from_step_execution_id)
        if parent is not None and parent.step_type == s.step_type and polled[parent.step_execution_id] is not None:
            nxt.setdefault(parent.step_execution_id, s.step_execution_id)
    targets = set(nxt.values())
    best: dict[str, TimerLoop] = {}
    for head in (sid for sid in nxt if sid not in targets):
        chain = [head]
        while chain[-1] in nxt and len(chain) <= len(steps):
            chain.append(nxt[chain[-1]])
        loop = TimerLoop(by_id[head].step_type, tuple(chain), _interval([polled[c] for c in chain[:-1]]))
        current = best.get(loop.step_type)
        if loop.moves >= min_moves and (current is None or loop.moves > current.moves):
            best[loop.step_type] = loop
    return sorted(best.values(), key=lambda lp: lp.executions[0])


def _interval(intervals: list[float | None]) -> float | None:
    found = set(intervals)
    return found.pop() if len(found) == 1 else None


# --------------------------------------------------------------------------- findings
@dataclass
class RunLintReport:
    """The findings of one run (`dex lint --flow-id`)."""

    flow_id: str
    flow_type: str
    findings: list[Finding]
    suppressed: int = 0  # findings at a line marked `# dex: ignore[timer-self-loop]`

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def exit_code(self, exit_zero: bool = False) -> int:
        return 1 if self.findings and not exit_zero else 0


def lint_run(flow_id: str, flow_type: str, steps: Iterable[StepRun], flow: Any | None = None) -> RunLintReport:
    """The timer-self-loop findings of a run; `flow` (its definition, when it loads) gives each the
    file:line of the step's goTo to itself."""
    findings = []
    suppressed = 0
    for loop in timer_self_loops(steps):
        every = f", each after {format_duration(loop.interval)}" if loop.interval is not None else ""
        text = (f"{loop.step_type} waited only on a Timer and then moved to a new execution of itself "
                f"{loop.moves} times in a row ({loop.executions[0]} … {loop.executions[-1]}{every})")
        file, line = _self_goto(flow, loop.step_type) if flow is not None else (None, None)
        if ignored(file, line, RULE):
            suppressed += 1
            continue
        msg = f'{text}. Anti-pattern: "{SEED[RULE]}" Fix: {FIX[RULE]}.'
        findings.append(Finding(RULE, "warning", file, line, msg, flow_type, loop.step_type, run=flow_id))
    return RunLintReport(flow_id, flow_type, findings, suppressed)


def _self_goto(flow: Any, step_type: str) -> tuple[str | None, int | None]:
    """Where the step of this type goes to itself in its source (else its class), best effort."""
    from dexcli.sdk.flow import Step

    try:
        steps = [(s.get_step_type(), s) for s in flow.get_steps().all_steps() if isinstance(s, Step)]
        inst = next(s for st, s in steps if st == step_type)
        for site in step_source(type(inst)).sites:
            if site.kind == "goTo" and resolve_target(site, inst, steps).step_type == step_type:
                return site.file, site.line
        return class_location(type(inst))
    except Exception:  # the definition changed or does not load: the finding stands without a place
        return None, None
