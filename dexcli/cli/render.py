"""Rich renderings of a flow snapshot (the `inspect --json` dict): the live view, the final
card, `dex inspect`, and plain lines for pipes. Everything here reads a snapshot; nothing
reads engine state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from dexcli.cli import render_locks as rl
from dexcli.cli import render_wait as rw
from dexcli.cli.brief import brief_json
from dexcli.cli.config import clock_time, format_duration, parse_iso
from dexcli.cli.render_subflows import subflow_lines
from dexcli.cli.shown import shown

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult

    from dexcli.plugins import Hint

BAR_WIDTH = 18
STATUS_STYLE = {
    "COMPLETED": "green", "FAILED": "red", "CANCELED": "yellow", "TERMINATED": "red", "RUNNING": "cyan",
    "CONTINUED_AS_NEW": "blue",
}
STEP_GLYPH = {
    "COMPLETED": ("✓", "green"), "RUNNING": ("▶", "cyan"), "BACKOFF": ("…", "yellow"),
    "QUEUED": ("·", "dim"), "FAILED": ("✗", "red"), "CANCELED": ("⊘", "yellow"), "WAITING": ("○", "magenta"),
}


def error_text(error_type: str | None, message: str) -> str:
    """`TYPE: message`, or the message alone when the flow ended without an error type (a
    cancel or terminate with a reason)."""
    return f"{error_type}: {message}" if error_type else message

def error_place(attempt: dict[str, Any]) -> str:
    """` at file:line` of the innermost user frame of a failed attempt, or ''."""
    from dexcli.engine.user_code import innermost_place
    from dexcli.graph.lint import short_path

    place = innermost_place(attempt.get("stackTrace"))
    return f" at {shown(short_path(place))}" if place else ""


def short_value(v: Any, limit: int = 60) -> str:
    if isinstance(v, dict) and "state" in v:
        text = str(v["state"])
        if v.get("result"):
            text += f" {brief_json(v['result'], limit)}"
        return text
    if isinstance(v, str):
        return v if len(v) <= limit else v[: limit - 1] + "…"
    return brief_json(v, limit)


def decision_text(d: dict[str, Any] | None) -> str:
    if not d:
        return ""
    kind = d.get("kind", "")
    if kind == "goTo":
        return "goTo " + ", ".join(n["stepType"] for n in d.get("next", []))
    if kind == "forceFail":
        return f"forceFail: {d.get('reason', '')}"
    if "output" in d:
        return f"{kind} → {short_value(d['output'])}"
    return str(kind)


def bar(fraction: float, style: str) -> Text:
    f = min(max(fraction, 0.0), 1.0)
    filled = int(round(f * BAR_WIDTH))
    t = Text("█" * filled, style=style)
    t.append("░" * (BAR_WIDTH - filled), style="dim")
    return t


def _duration_between(a: str | None, b: str | None) -> float | None:
    ta, tb = parse_iso(a), parse_iso(b)
    if ta is None or tb is None:
        return None
    return tb - ta


def _failed_attempt_lines(step: dict[str, Any]) -> list[Text]:
    out = []
    for a in step["attempts"]:
        if a["outcome"] in ("FAILED", "TIMED_OUT", "LOST"):
            why = {"LOST": "lost", "TIMED_OUT": "timed out"}.get(a["outcome"], "failed")
            line = Text(f"     ✗ attempt {a['attempt']}  ", style="red")
            line.append(f"{why} — {a['errorType']}: {a['detail']}", style="red")
            out.append(line)
    return out


def attempt_label(step: dict[str, Any], number: int, method: str | None = None) -> str:
    """Attempt `number` of the step (of its current method, or `method`) against its
    maximum_attempts: `2/3`. Interrupted attempts (Ctrl-C, SIGTERM, a closed output) do not
    count against the limit, so after two of them the fifth reads `5 (3/3, +2
    interrupted)`, never a `5/3` that looks like a broken limit."""
    limit = step["maxAttempts"]
    method = method or step.get("method") or "EXECUTE"
    skipped = sum(1 for a in step["attempts"] if a["outcome"] == "INTERRUPTED" and a["attempt"] < number
                  and (a.get("method") or "EXECUTE") == method)
    if not limit:
        return f"{number}/∞"
    if not skipped:
        return f"{number}/{limit}"
    return f"{number} ({number - skipped}/{limit}, +{skipped} interrupted)"


def _label(step: dict[str, Any], a: dict[str, Any]) -> str:
    return attempt_label(step, a["attempt"], a.get("method"))


def due_in(seconds: float, soon: str = "times out in", late: str = "overdue by") -> str:
    """`times out in 12 s`, or once that has passed, `overdue by 1 m 12 s`."""
    return f"{soon} {format_duration(seconds)}" if seconds >= 0 else f"{late} {format_duration(-seconds)}"


def overdue_line(snap: dict[str, Any]) -> Text | None:
    """What to say when a deadline passed and no live process holds the flow, with the fix."""
    late = snap.get("overdue")
    if not late:
        return None
    return Text(f" {late['stepExecutionId']} overdue by {format_duration(late['seconds'])} — no process is "
                f"driving this flow: `dex resume {snap['summary']['flowId']}`", style="bold red")


def step_lines(step: dict[str, Any], now: float, flow_id: str = "") -> list[RenderableType]:
    glyph, style = STEP_GLYPH.get(step["status"], ("?", ""))
    seid = step["stepExecutionId"]
    head = Text(f" {glyph} ", style=style)
    head.append(f"{seid:<24}", style="bold" if step["status"] == "RUNNING" else "")
    if step["status"] in ("COMPLETED", "FAILED", "CANCELED"):
        return _ended_step_lines(step, head)
    if step["status"] == "RUNNING":
        return _running_step_lines(step, head)
    if step["status"] == "BACKOFF":
        return _backoff_step_lines(step, flow_id)
    lock_wait = rl.lock_wait_text(step)
    head.append(lock_wait or "queued", style="yellow" if lock_wait else "dim")
    return [head]


def _ended_step_lines(step: dict[str, Any], head: Text) -> list[RenderableType]:
    lines: list[RenderableType] = []
    last = step["attempts"][-1] if step["attempts"] else None
    # the step's whole time, from its first attempt: its wait (wait_for to execute) and retries count
    dur = _duration_between(step["attempts"][0]["startTime"], last["endTime"]) if last else None
    head.append(f"{format_duration(dur) if dur is not None else '':>8}   ")
    if step["status"] == "COMPLETED":
        head.append(decision_text(step["decision"]))
        if last is not None and sum(a.get("method") != "WAIT_FOR" for a in step["attempts"]) > 1:
            label = _label(step, last)
            head.append(f"  attempt {label}" if "(" in label else f"  (attempt {label})", style="dim")
    elif step["status"] == "FAILED" and last:
        head.append(f"{last['errorType']} after attempt {_label(step, last)}", style="red")
    else:
        head.append("canceled", style="yellow")
    lines.append(head)
    if step["recoveryError"]:
        rec = step["recoveryError"]
        lines.append(Text(f"     recovering from {step['fromStepExecutionId']}: "
                          f"{rec['errorType']}: {rec['detail']}",
                          style="dim"))
    if step["status"] != "COMPLETED" or len(step["attempts"]) > 1:
        lines.extend(_failed_attempt_lines(step))
    return lines


def _running_step_lines(step: dict[str, Any], head: Text) -> list[RenderableType]:
    lines: list[RenderableType] = []
    r = step["running"]
    opts = step["options"]
    head.append(f"attempt {attempt_label(step, step['attempt'])}   running {format_duration(r['secondsRunning'])}")
    lines.append(head)
    lines.extend(_failed_attempt_lines(step))
    hb_to = opts["heartbeatTimeout"]
    since = r["secondsSinceHeartbeat"]
    lost = r.get("ownerAlive") is False
    hb = Text("     heartbeat   ")
    hb.append_text(bar(since / hb_to, "red" if lost else "cyan"))
    if lost:
        since_time = clock_time(step["lastHeartbeatTime"] or r["attemptStartTime"])
        hb.append(f"  attempt {step['attempt']} lost? no heartbeat since {since_time}"
                  f" — {due_in(r['secondsHeartbeatLeft'])}", style="red")
    else:
        hb.append(f"  {format_duration(since)} ago · {due_in(r['secondsHeartbeatLeft'])}")
    lines.append(hb)
    at = Text("     attempt     ")
    mt = opts["executeMethodTimeout"]
    at.append_text(bar(r["secondsRunning"] / mt, "blue"))
    at.append(f"  {format_duration(r['secondsAttemptLeft'])} left (ExecuteMethodTimeout {format_duration(mt)})")
    lines.append(at)
    tot = Text("     total       ")
    td = opts["totalDuration"]
    tot.append_text(bar(1 - r["secondsTotalLeft"] / td, "magenta"))
    tot.append(f"  {format_duration(r['secondsTotalLeft'])} left (TotalDuration {format_duration(td)})")
    lines.append(tot)
    cp = Text("     checkpoint  ")
    cp.append(short_value(step["lastHeartbeatValue"]) if step["hasCheckpoint"] else "none", style="bold")
    lines.append(cp)
    held = rl.held_line(step)
    if held is not None:
        lines.append(held)
    return lines


def _backoff_step_lines(step: dict[str, Any], flow_id: str) -> list[RenderableType]:
    """A retrying step: the next attempt, when, the time left, and how to stop it (retries
    are unlimited unless the step sets maximum_attempts)."""
    lines: list[RenderableType] = []
    last = step["attempts"][-1] if step["attempts"] else None
    nxt = Text(f" … {step['stepExecutionId']:<24}attempt {attempt_label(step, step['attempt'] + 1)} · "
               f"{due_in(step.get('secondsToNextAttempt') or 0, 'next in')} · total left "
               f"{format_duration(max(0.0, step.get('secondsTotalLeft', 0.0)))}", style="yellow")
    if flow_id:
        nxt.append(f" · Ctrl-C or `dex stop {flow_id}`", style="yellow")
    if last:
        nxt.append(f" (backoff after {last['errorType']})", style="dim")
    if step["hasCheckpoint"]:
        nxt.append(f"   checkpoint {short_value(step['lastHeartbeatValue'])}")
    lines.append(nxt)
    lines.extend(_failed_attempt_lines(step))  # under their step, as a running step's are
    return lines


def stream_lines(snap: dict[str, Any], compact: bool = False) -> list[Text]:
    start = parse_iso(snap["summary"]["startTime"]) or 0.0
    out: list[Text] = []
    for name, msgs in snap["streams"].items():
        if compact:
            t = Text(f" {name}  ", style="bold")
            t.append("   ".join(f"+{(parse_iso(m['createdTime']) or 0) - start:.1f} s {short_value(m['value'])}"
                                for m in msgs))
            out.append(t)
            continue
        out.append(Text(f" {name}", style="bold"))
        for m in msgs[-12:]:
            t = Text(f"   +{(parse_iso(m['createdTime']) or 0) - start:.1f} s  ")
            t.append(short_value(m["value"]), style="bold")
            t.append(f"  {m['source']}", style="dim")
            out.append(t)
    return out


def header(snap: dict[str, Any], db: str, offset: float) -> Text:
    s = snap["summary"]
    t = Text(" dex · ", style="dim")
    t.append(s["flowType"], style="bold")
    t.append(" · ")
    t.append(s["flowId"], style="bold cyan")
    t.append(f" · db {db}", style="dim")
    if offset:
        t.append(f" · clock +{format_duration(offset)}", style="yellow")
    return t


class Hanging:
    """A line that wraps under itself: continuation lines are indented past the line's own
    indent, so a long line in a narrow terminal does not run back to column 0."""

    def __init__(self, text: Text) -> None:
        self.text = text
        self.indent = len(text.plain) - len(text.plain.lstrip(" ")) + 2

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        if self.text.cell_len <= width or width <= self.indent + 10:
            yield self.text
            return
        for i, line in enumerate(self.text.wrap(console, width - self.indent, overflow="fold")):
            if i:
                line = Text(" " * self.indent) + line
            line.rstrip()
            yield line


def hanging(parts: list[RenderableType]) -> list[RenderableType]:
    return [Hanging(p) if isinstance(p, Text) else p for p in parts]


def live_view(snap: dict[str, Any], db: str, offset: float = 0.0, hints: tuple[Hint, ...] = (),
              rpcs: tuple[str, ...] = ()) -> RenderableType:
    """The live view of one flow. `hints`: what its flow plugin suggests while it runs
    (`complete early:  dex complete-job demo`), shown before `inspect:  dex inspect ID`;
    `rpcs`: the flow's RPC names, offered to move a waiting step on."""
    from rich.console import Group
    from rich.rule import Rule

    now = parse_iso(snap["now"]) or 0.0
    parts: list[RenderableType] = [header(snap, db, offset), Rule(style="dim")]
    fid = snap["summary"]["flowId"]
    for step in snap["steps"]:
        if step["status"] == "WAITING":
            parts.extend(rw.waiting_lines(step, snap, now, rpcs))
        else:
            parts.extend(step_lines(step, now, fid))
    parts.extend(stream_lines(snap))
    parts.extend(subflow_lines(snap))
    parts.append(Rule(style="dim"))
    if rw.only_external_input(snap):
        parts.append(Text(f" {rw.EXTERNAL_INPUT}", style="yellow"))
    if rw.idle_without_steps(snap):
        parts.append(Text(f" {rw.no_start_step_text(fid, rpcs)}", style="yellow"))
    late = overdue_line(snap)
    if late is not None:
        parts.append(late)
    if snap["summary"]["flowStatus"] == "RUNNING":
        offered = [h.text for h in (hints if late is None else ())  # the plugin's commands help only a driven flow
                   if h.applies(snap["steps"])]  # and only while the step they act on is open
        parts.append(Pieces([*offered, f"inspect:  dex inspect {fid}"], style="dim"))
    return Group(*hanging(parts))


class Pieces:
    """Whole pieces on a line, GAP apart (the live view's footer: `label:  command` hints). A
    piece that does not fit where the line is starts the next line (indented); one too long for
    a line of its own breaks after its label, so a command is never split between lines unless
    it alone is wider than the terminal."""

    GAP = "      "
    INDENT = "   "

    def __init__(self, pieces: list[str], style: str = "") -> None:
        self.pieces, self.style = pieces, style

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        units: list[tuple[str, str]] = []  # (text, what goes before it on the same line)
        for piece in self.pieces:
            label, sep, command = piece.partition(":  ")
            if sep and len(self.INDENT + piece) > width:
                units += [(label + ":", self.GAP), (command, "  ")]
            else:
                units.append((piece, self.GAP))
        lines, line = [], " "
        for text, before in units:
            if line.strip() and len(line + before + text) > width:
                lines.append(line)
                line = self.INDENT + text
            else:
                line += (before if line.strip() else "") + text
        lines.append(line)
        for ln in lines:
            yield Hanging(Text(ln, style=self.style))


def final_card(snap: dict[str, Any]) -> RenderableType:
    s = snap["summary"]
    status = s["flowStatus"]
    t = Text(" ")
    t.append(status, style=f"bold {STATUS_STYLE.get(status, '')}")
    if s.get("durationSeconds") is not None:
        t.append(f" in {format_duration(s['durationSeconds'])}")
    if s["completions"]:
        outs = ", ".join(brief_json(c["output"]) for c in s["completions"])
        t.append(f"   result: {outs}")
    if s["errorMessage"]:
        t.append(f"   {error_text(s['errorType'], s['errorMessage'])}", style="red")
    t.append(f"\n dex inspect {s['flowId']}", style="dim")
    return t


def _ended_text(st: dict[str, Any], a: dict[str, Any]) -> str:
    """The plain line of an attempt that ended."""
    seid = st["stepExecutionId"]
    if a["outcome"] == "COMPLETED":
        return f"✓ {seid} wait_for returned its Wait" if a.get("method") == "WAIT_FOR" else \
            f"✓ {seid} {decision_text(st['decision'])}"
    if a["outcome"] == "CANCELED":
        return f"⊘ {seid} attempt {a['attempt']} canceled"
    outcome = a["outcome"].lower().replace("_", " ")
    why = ": ".join(str(part) for part in (a["errorType"], a["detail"]) if part)  # INTERRUPTED has no type
    return f"✗ {seid} attempt {_label(st, a)} {outcome}" + (f": {why}" if why else "")


class LineDiffer:
    """Turns successive snapshots into plain lines: what happened since the last one.

    Used when output is not a terminal (pipes, CI) and by `dex watch`, so nothing shown live
    is lost and every line can be re-derived from the database.
    """

    def __init__(self, rpcs: tuple[str, ...] = ()) -> None:
        self.rpcs = rpcs  # the flow's RPC names, offered to move a waiting step on
        self._waits: dict[str, str] = {}  # step execution id -> the last wait state printed
        self._lock_waits: dict[str, str] = {}  # step execution id -> the lock wait last printed
        self._attempts: dict[tuple[str, str | None, int], tuple[str, int]] = {}
        self._streams: set[str] = set()
        self._steps: dict[str, str] = {}
        self._children: dict[str, str] = {}  # SubFlow id -> the status last printed
        self._closed = False
        self._external = False  # whether the last snapshot could move on only by external input
        self._idle = False  # whether the last snapshot had no step at all (no start step, no RPC yet)
        self._overdue = False  # said that no process drives the flow (said again once it moves)

    def lines(self, snap: dict[str, Any]) -> list[str]:
        start = parse_iso(snap["summary"]["startTime"]) or 0.0
        events: list[tuple[float, str]] = []  # (when, what), in the order found
        for st in snap["steps"]:
            events += self._step_events(st, snap)
        events += self._stream_events(snap)
        events += self._child_events(snap)
        ordered = sorted(enumerate(events), key=lambda e: (e[1][0], e[0]))
        out = [f"+{t - start:7.1f}s  {text}" for _, (t, text) in ordered]
        external = rw.only_external_input(snap)
        if external and not self._external:
            out.append(f"          … {rw.EXTERNAL_INPUT}")
        self._external = external
        idle = rw.idle_without_steps(snap)
        if idle and not self._idle:
            out.append(f"          … {rw.no_start_step_text(snap['summary']['flowId'], self.rpcs)}")
        self._idle = idle
        late = overdue_line(snap)
        if late is not None and (events or not self._overdue):
            out.append(late.plain.strip())
        self._overdue = late is not None
        return out

    def _step_events(self, st: dict[str, Any], snap: dict[str, Any]) -> list[tuple[float, str]]:
        """What happened to one step execution since the last snapshot: attempts started,
        heartbeats, attempts ended, a backoff, its wait, a lock it waits for."""
        seid = st["stepExecutionId"]
        events: list[tuple[float, str]] = []
        for a in st["attempts"]:
            key = (seid, a.get("method"), a["attempt"])
            prev = self._attempts.get(key)
            t = parse_iso(a["startTime"]) or 0.0
            if prev is None:
                what = "wait_for attempt" if a.get("method") == "WAIT_FOR" else "attempt"
                events.append((t, f"▶ {seid} {what} {_label(st, a)} started"))
            if a["heartbeats"] > (prev[1] if prev else 0):
                current = a["attempt"] == st["attempt"] and a.get("method") == st.get("method")
                cp = (f" · checkpoint {short_value(st['lastHeartbeatValue'])}"
                      if current and st["hasCheckpoint"] else "")
                hb_t = parse_iso(a.get("lastHeartbeatTime")) or t
                events.append((hb_t, f"♥ {seid} heartbeat #{a['heartbeats']}{cp}"))
            if a["outcome"] != "RUNNING" and (prev is None or prev[0] == "RUNNING"):
                events.append((parse_iso(a["endTime"]) or t, _ended_text(st, a)))
            self._attempts[key] = (a["outcome"], a["heartbeats"])
        if st["status"] == "BACKOFF" and self._steps.get(seid) != f"BACKOFF{st['attempt']}":
            nt = parse_iso(st.get("nextAttemptTime")) or 0.0
            events.append((nt - 1e-6, f"… {seid} attempt {st['attempt'] + 1} scheduled (backoff)"))
            self._steps[seid] = f"BACKOFF{st['attempt']}"
        events += rw.wait_events(st, snap, self._waits, self.rpcs)
        now = parse_iso(snap["now"]) or 0.0
        events += [(now, line) for line in rl.lock_wait_events(st, self._lock_waits)]
        return events

    def _child_events(self, snap: dict[str, Any]) -> list[tuple[float, str]]:
        """A SubFlow started by this flow, and its end."""
        events: list[tuple[float, str]] = []
        for c in snap.get("subFlows") or []:
            fid, status, seen = c["flowId"], c["flowStatus"], self._children.get(c["flowId"])
            if seen is None:
                events.append((parse_iso(c["startTime"]) or 0.0, f"↳ {fid} ({c['flowType']}) started"))
            if status != "RUNNING" and seen != status:
                events.append((parse_iso(c["closeTime"]) or 0.0, f"↳ {fid} {status}"))
            self._children[fid] = status
        return events

    def _stream_events(self, snap: dict[str, Any]) -> list[tuple[float, str]]:
        events: list[tuple[float, str]] = []
        for name, msgs in snap["streams"].items():
            for m in msgs:
                stream_key = f"{name}/{m['resumeToken']}"
                if stream_key in self._streams:
                    continue
                self._streams.add(stream_key)
                t = parse_iso(m["createdTime"]) or 0.0
                events.append((t, f"✉ {name} {short_value(m['value'])}  ({m['source']})"))
        return events
