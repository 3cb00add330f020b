"""`dex inspect`'s text view: the summary, what the flow waits on, every attempt, history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from dexcli.cli import render_locks as rl
from dexcli.cli import render_subflows as rs
from dexcli.cli import render_wait as rw
from dexcli.cli.brief import brief_json
from dexcli.cli.config import clock_time, format_duration, parse_iso
from dexcli.cli.render import (
    STATUS_STYLE,
    _duration_between,
    attempt_label,
    decision_text,
    due_in,
    error_place,
    error_text,
    overdue_line,
    short_value,
    stream_lines,
)
from dexcli.cli.render_options import config_text, history_text, options_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
    from rich.table import Table

INSPECT_VALUE_LIMIT = 1000  # characters of a value shown whole (`dex inspect --json` has it all)


def waiting_on(snap: dict[str, Any]) -> Text | None:
    """One line that explains a running flow: what it waits on and until when."""
    if snap["summary"]["flowStatus"] != "RUNNING":
        return None
    parts = []
    for st in snap["steps"]:
        if st["status"] == "RUNNING":
            r = st["running"]
            who = "lost? " if r.get("ownerAlive") is False else ""
            kind = r["nextTimeout"]
            parts.append(
                f"{st['stepExecutionId']} attempt {st['attempt']} {who}— last heartbeat "
                f"{format_duration(r['secondsSinceHeartbeat'])} ago, "
                f"{due_in(r['secondsToTimeout'], kind + ' timeout in', kind + ' timeout overdue by')} "
                f"(at {clock_time(r['nextTimeoutTime'])})")
        elif st["status"] == "BACKOFF":
            parts.append(f"{st['stepExecutionId']} attempt {st['attempt'] + 1} starts at "
                         f"{clock_time(st.get('nextAttemptTime'))} "
                         f"(in {format_duration(st.get('secondsToNextAttempt') or 0)})")
        elif st["status"] == "QUEUED" and st.get("waitingForLock"):
            parts.append(f"{st['stepExecutionId']} is {rl.lock_wait_text(st)}")
        elif st["status"] == "QUEUED":
            parts.append(f"{st['stepExecutionId']} queued — needs a running dex "
                         f"(dex resume {snap['summary']['flowId']})")
        elif st["status"] == "WAITING":
            active = rw.active_of(snap, st["stepExecutionId"])
            what = rw.summary(snap, active, parse_iso(snap["now"]) or 0.0) if active else "its wait"
            parts.append(f"{st['stepExecutionId']} waits for {what}")
    if rw.idle_without_steps(snap):
        parts.append(rw.no_start_step_text(snap["summary"]["flowId"]))
    elif not parts:
        parts.append("nothing is queued or running — the flow is idle (dead end) until it is stopped")
    t = Text(" Waiting on:  ", style="bold")
    t.append(" · ".join(parts))
    return t


def runs_lines(snap: dict[str, Any]) -> list[Text]:
    """The flow id's runs, oldest first, when it has more than one: which came from which (a
    time travel, a continue-as-new, an id reuse), which is current, and how to show an earlier one."""
    runs = snap.get("runs") or []
    if len(runs) < 2:
        return []
    base = runs[-1]["flowId"].split("$", 1)[0]
    out = [Text(" Runs", style="bold")]
    for r in runs:
        line = Text("  → " if r["shown"] else "    ")
        line.append(r["runId"], style="bold" if r["current"] else "")
        line.append(f"  {r['status']}", style=STATUS_STYLE.get(r["status"], ""))
        line.append(f"  started {r['startTime']}")
        if r["previousRunId"]:
            how = {"timeTravel": "time travel", "continueAsNew": "continue-as-new",
                   "flowRetry": "flow retry"}.get(r["via"], "id reuse")
            line.append(f"  from {r['previousRunId'][:8]} by {how}", style="dim")
        if r["current"]:
            line.append("  current", style="dim")
        out.append(line)
    out.append(Text(f"    (dex inspect {base} --run-id RUN shows one)", style="dim"))
    return out


def inspect_view(snap: dict[str, Any], offset: float = 0.0) -> RenderableType:
    from rich.console import Group

    return Group(*inspect_parts(snap, offset))


def inspect_parts(snap: dict[str, Any], offset: float = 0.0) -> list[Text | StepsTable]:
    """`dex inspect`'s view, top to bottom: lines of Text and the steps table (what
    dexcli.cli.plain_text prints without Rich's console when stdout is not a terminal)."""
    s = snap["summary"]
    now = parse_iso(snap["now"]) or 0.0
    start = parse_iso(s["startTime"]) or now
    ran = s.get("durationSeconds")
    title = Text(f" {s['flowType']} · {s['flowId']} · ", style="bold")
    title.append(s["flowStatus"], style=f"bold {STATUS_STYLE.get(s['flowStatus'], '')}")
    title.append(f" {'for' if s['flowStatus'] == 'RUNNING' else 'after'} "
                 f"{format_duration(now - start if ran is None else ran)}")
    parts: list[Text | StepsTable] = [title]
    meta = Text(f" run {s['runId']} · started {s['startTime']}", style="dim")
    if offset:
        meta.append(f" · its clock +{format_duration(offset)} ahead of real time", style="yellow")
    parts.append(meta)
    parts.extend(runs_lines(snap))
    options = options_text(s)
    if options is not None:
        parts.append(options)
    config = config_text(snap.get("state", {}).get("flowConfig"))
    if config is not None:
        parts.append(config)
    if s["completions"]:
        results = ", ".join(brief_json(c["output"], INSPECT_VALUE_LIMIT) for c in s["completions"])
        parts.append(Text(" Result:  " + results, style="green"))
    if s["errorMessage"]:
        parts.append(Text(f" Error:   {error_text(s['errorType'], s['errorMessage'])}", style="red"))
    parts.extend(rs.subflow_lines(snap))
    w = waiting_on(snap)
    if w is not None:
        parts.append(w)
        moves = [c for a in snap.get("state", {}).get("activeStepExecutions", []) if a["phase"] == "WAITING"
                 for c in rw.commands(snap, a, ())]
        if moves:
            parts.append(Text(" Move on:     " + " · ".join(moves), style="dim"))
    late = overdue_line(snap)
    if late is not None:
        parts.append(late)
    parts.append(Text(" Steps", style="bold"))
    parts.append(StepsTable(snap, now))
    parts.extend(rl.attribute_lines(snap))
    parts.extend(stream_lines(snap))
    parts.append(Text(" History", style="bold"))
    parts.extend(_history_line(e) for e in snap["history"])
    return parts


class StepsTable:
    """The steps table at the width it is drawn at: ids and words are never split inside, so in
    a narrow terminal (under WIDE columns) the start column gives its room to error / decision
    (History has the times)."""

    WIDE = 100

    def __init__(self, snap: dict[str, Any], now: float) -> None:
        self.snap, self.now = snap, now

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield _steps_table(*self.cells(options.max_width))

    def cells(self, width: int) -> tuple[tuple[str, ...], list[tuple[str | Text, ...]]]:
        """The column headers and the rows' cells at `width` (the last column wraps; the others
        never do)."""
        return _steps_cells(self.snap, self.now, with_start=width >= self.WIDE)


def _steps_table(cols: tuple[str, ...], rows: list[tuple[str | Text, ...]]) -> Table:
    from rich.table import Table

    table = Table(title=None, box=None, pad_edge=False, show_edge=False, expand=False)
    for col in cols[:-1]:
        table.add_column(col, no_wrap=True)
    table.add_column(cols[-1], overflow="fold")  # wraps between words (folds only a word too long)
    for row in rows:
        table.add_row(*row)
    return table


def _steps_cells(snap: dict[str, Any], now: float,
                 with_start: bool = True) -> tuple[tuple[str, ...], list[tuple[str | Text, ...]]]:
    cols = ("step", "status", "attempt", "start", "duration", "outcome") if with_start else \
        ("step", "status", "attempt", "duration", "outcome")
    rows: list[tuple[str | Text, ...]] = []

    def add_row(*cells: str | Text) -> None:
        rows.append(tuple(c for i, c in enumerate(cells) if with_start or i != 3))
    for st in snap["steps"]:
        first = True
        for a in st["attempts"] or [None]:
            if a is None:
                add_row(st["stepExecutionId"], st["status"], "-", "-", "-", "-", "")
                continue
            dur = _duration_between(a["startTime"], a["endTime"])
            if dur is None and a["outcome"] == "RUNNING":
                dur = now - (parse_iso(a["startTime"]) or now)
            if a.get("method") == "WAIT_FOR":
                info = _wait_for_text(st, a)
            elif a["outcome"] == "COMPLETED":
                info = decision_text(st["decision"])
            elif a["errorType"]:
                info = f"{a['errorType']}: {a['detail']}{error_place(a)}"
            else:
                info = ""
            add_row(st["stepExecutionId"] if first else "", st["status"] if first else "",
                    attempt_label(st, a["attempt"], a.get("method")), clock_time(a["startTime"]),
                    format_duration(dur) if dur is not None else "-",
                    Text(a["outcome"], style=_outcome_style(a["outcome"])), info)
            first = False
        if st["status"] == "RUNNING" and st["hasCheckpoint"]:
            add_row("", "", "", "", "", "checkpoint", short_value(st["lastHeartbeatValue"]))
        if st["recoveryError"]:
            rec = st["recoveryError"]
            add_row("", "", "", "", "", "recovering", f"from {st['fromStepExecutionId']}: "
                          f"{rec['errorType']}: {rec['detail']}")
    return (*cols, "error / decision"), rows


def _wait_for_text(st: dict[str, Any], a: dict[str, Any]) -> str:
    """The error / decision cell of a wait_for attempt: what its wait came to."""
    if a["errorType"]:
        return f"wait_for: {a['errorType']}: {a['detail']}"
    wf = st.get("waitFor") or {}
    chosen = rw.selected_ids(wf.get("conditionResults"))
    if wf.get("outcome") == "COMPLETED":
        return "wait_for → " + (", ".join(chosen) + " ready" if chosen else "ready")
    return f"wait_for → {(wf.get('outcome') or 'running').lower()}"


def _history_line(e: dict[str, Any]) -> Text:
    line = Text(f"   {e['eventId']:>3}  {clock_time(e['eventTime'])}  {e['type']:<22}")
    if "stepExecutionId" in e:
        line.append(f"{e['stepExecutionId']}  ")
    if e["type"] == "StepExecuteCompleted":
        line.append(decision_text(e.get("decision")), style="dim")
    elif e["type"] == "StepExecuteFailed":
        line.append(f"{e['errorType']}: {e['detail']} ({e['reason']})", style="red")
        if e.get("recoveryStepExecutionId"):
            line.append(f" → {e['recoveryStepExecutionId']}")
    elif e["type"] == "FlowClosed":
        line.append(e["flowStatus"], style=STATUS_STYLE.get(e["flowStatus"], ""))
        if e.get("errorMessage"):
            line.append(f" {error_text(e['errorType'], e['errorMessage'])}", style="dim")
        if e.get("continuedToRunId"):
            line.append(f" → run {e['continuedToRunId']} ({e.get('reason', '')})", style="dim")
    elif e["type"] == "FlowContinued":
        carried = [x["stepExecutionId"] for x in e.get("stepsToStart", []) + e.get("stepsToResume", [])]
        line.append(f"continued from run {e['previousRunId']} with {', '.join(carried) or 'no open step'} "
                    f"({e.get('reason', '')})", style="dim")
    elif e["type"] == "RpcExecutionCompleted":
        again = f" (re-applied from event {e['reappliedFromEventId']})" if e.get("reappliedFromEventId") else ""
        line.append(f"{e['rpcName']} → {short_value(e.get('output'))}{again}", style="dim")
    elif e["type"] == "TimeTravelFork":
        line.append(time_travel_text(e), style="yellow")
    elif e["type"] == "TimerSkipped":
        line.append(f"timer {e.get('conditionId') or '#' + str(e['timerIndex'])}", style="dim")
    elif e["type"] == "StepWaitForCompleted":
        line.append(f"ready: {', '.join(rw.selected_ids(e['conditionResults'])) or '-'}", style="dim")
    elif e["type"] == "FlowStarted":
        given = brief_json(e["input"], INSPECT_VALUE_LIMIT)
        first = e.get("startStepExecutionId")
        began = f"start {first} input {given}" if first else "no start step: idle until an RPC starts one"
        line.append(f"{began}{history_text(e)}", style="dim")
    elif e["type"] == "FlowTimedOut":
        line.append(history_text(e), style="yellow")
    return line


def time_travel_text(e: dict[str, Any]) -> str:
    """A TimeTravelFork event: the run it came from, the point, what runs again, why."""
    point = {"BEGINNING": "the beginning", "HISTORY_EVENT_TIME": f"the time {e.get('historyEventTime')}"}.get(
        e.get("timeTravelType", ""), e.get("targetStepExecutionId") or e.get("targetStepType") or "?")
    if e.get("stepMethod"):
        point += f" ({e['stepMethod'].lower().replace('_', '-')})"
    text = f"from run {str(e.get('previousRunId'))[:8]}, to {point}: its events 1..{e.get('targetEventId')} kept"
    if e.get("requeued"):
        text += f", {', '.join(e['requeued'])} again"
    if e.get("skipWritesReapply"):
        text += ", later RPCs not re-applied"
    return text + (f" · {e['reason']}" if e.get("reason") else "")


def _outcome_style(outcome: str) -> str:
    return {"COMPLETED": "green", "RUNNING": "cyan", "FAILED": "red", "TIMED_OUT": "red", "LOST": "red",
            "CANCELED": "yellow"}.get(outcome, "")
