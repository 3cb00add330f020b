"""`dex inspect ID --timeline`: every step's attempts on one time axis, drawn from the
`dex inspect --json` snapshot (dexcli.engine.views.inspect_flow) and nothing else.

`timeline_lines(snap, width)` is pure: the same snapshot and width give the same lines, each
at most `width` cells. One row per step: attempt bars ending in their outcome, backoff gaps
between attempts; under it a row of marks: the attempt's last heartbeat, its Stream messages
and the deadlines (ExecuteMethodTimeout per attempt, TotalDuration per step) that fall on the
axis; under that, one line per attempt that did not simply complete, with its error type.

What the data does not hold is said, not drawn: dex keeps each attempt's heartbeat count and
the time of its last heartbeat only, and the clock offset of time skipping but not when each
skip happened, so skipped time is drawn as elapsed time (no breaks in the axis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from dexcli.cli.config import format_duration, parse_iso
from dexcli.cli.render import STATUS_STYLE

LABEL_MAX = 24  # a step execution id up to this long is shown whole
NOTES_PER_STEP = 5
MIN_PLOT = 20
NICE_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
              600, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400)
# what ends an attempt bar: glyph, style
END_GLYPH = {
    "COMPLETED": ("✓", "green"), "FAILED": ("✗", "red"), "TIMED_OUT": ("╳", "bold red"),
    "LOST": ("╳", "bold red"), "CANCELED": ("○", "yellow"), "INTERRUPTED": ("○", "yellow"),
    "RUNNING": ("▶", "cyan"),
}
BAR_STYLE = {"COMPLETED": "green", "RUNNING": "cyan", "CANCELED": "yellow", "INTERRUPTED": "yellow"}
KEY = (("━", "attempt"), ("╌", "silent: its process was gone"), ("✓", "completed"), ("✗", "failed"),
       ("╳", "timed out / lost"),
       ("○", "interrupted / canceled"), ("▶", "running now"), ("·", "backoff"),
       ("~", "waiting (WaitFor)"),
       ("♥", "last heartbeat (dex keeps the last one of each attempt)"),
       ("●", "Stream message"), ("E", "ExecuteMethodTimeout"), ("T", "TotalDuration"),
       ("═", "a SubFlow (child flow) running"))
SUBFLOW_END = {"COMPLETED": ("✓", "green"), "FAILED": ("✗", "red"), "CANCELED": ("○", "yellow"),
               "TERMINATED": ("╳", "bold red"), "RUNNING": ("▶", "cyan")}


@dataclass(frozen=True)
class Axis:
    """Maps a time (the flow's clock, epoch seconds) to a column of the plot."""

    start: float
    end: float
    cols: int

    def col(self, t: float) -> int:
        span = max(self.end - self.start, 1e-9)
        return min(self.cols - 1, max(0, int((t - self.start) / span * (self.cols - 1) + 0.5)))

    def holds(self, t: float) -> bool:
        return self.start <= t <= self.end


@dataclass
class Row:
    """One plot row: a cell per column, a higher priority overwriting a lower one."""

    cols: int
    cells: list[tuple[str, str, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cells = [(" ", "", 0)] * self.cols

    def put(self, col: int, glyph: str, style: str, priority: int) -> None:
        if 0 <= col < self.cols and priority >= self.cells[col][2]:
            self.cells[col] = (glyph, style, priority)

    def span(self, a: int, b: int, glyph: str, style: str, priority: int) -> None:
        for c in range(a, b + 1):
            self.put(c, glyph, style, priority)

    def glyphs(self) -> set[str]:
        return {g for g, _, _ in self.cells}

    @property
    def empty(self) -> bool:
        return all(g == " " for g, _, _ in self.cells)

    def text(self) -> Text:
        t = Text()
        for glyph, style, _ in self.cells:
            t.append(glyph, style=style)
        return t


def timeline_lines(snap: dict[str, Any], width: int, clock_offset: float = 0.0) -> list[Text]:
    """The timeline of one flow as lines of at most `width` cells (`clock_offset`: seconds the
    clock was skipped ahead, said under the picture)."""
    s = snap["summary"]
    now = parse_iso(snap["now"]) or 0.0
    start = parse_iso(s["startTime"]) or now
    end = parse_iso(s["closeTime"]) or now
    labels = [st["stepExecutionId"] for st in snap["steps"]]
    labels += [_child_label(c["flowId"], s["flowId"]) for c in snap.get("subFlows") or []]
    label_w = min(LABEL_MAX, max([len(x) for x in labels] + [6])) + 2
    plot = max(MIN_PLOT, width - label_w - 1)
    axis = Axis(start, max(end, start + 1e-3), plot)
    lines = _title(s, end - start, width)
    lines.extend(_scale(axis, label_w))
    off_axis: list[str] = []
    used: set[str] = set()  # the glyphs drawn, for the key
    for st in snap["steps"]:
        lines.extend(_step_rows(st, axis, label_w, snap["streams"], off_axis, used))
    lines.extend(_foreign_stream_rows(snap, axis, label_w, used))
    lines.extend(_subflow_rows(snap, axis, label_w, now, used))
    for st in snap["steps"]:
        lines.extend(_attempt_notes(st, axis))
    for note in off_axis:
        lines.append(Text(f" {note}", style="dim"))
    lines.extend(_key(used, width))
    if clock_offset:
        lines.append(Text(f" This flow's clock is +{format_duration(clock_offset)} ahead (time skipping). dex does "
                          "not record", style="yellow"))
        lines.append(Text(" when a skip happened: skipped time is drawn as elapsed time, with no break.",
                          style="yellow"))
    return [_fit(line, width) for line in lines]


def _fit(line: Text, width: int) -> Text:
    line.rstrip()
    if line.cell_len > width:
        line.truncate(width, overflow="ellipsis")
    return line


def _title(s: dict[str, Any], duration: float, width: int) -> list[Text]:
    """The title line; two when a long flow id would push its status off the line."""
    t = Text(" timeline · ", style="dim")
    t.append(f"{s['flowType']} · {s['flowId']}", style="bold")
    status = Text(s["flowStatus"], style=f"bold {STATUS_STYLE.get(s['flowStatus'], '')}")
    status.append(f" {'for' if s['flowStatus'] == 'RUNNING' else 'after'} {format_duration(duration)}", style="")
    if t.cell_len + 3 + status.cell_len <= width:
        return [t + Text(" · ", style="bold") + status]
    return [t, Text(" ") + status]


def short_time(seconds: float) -> str:
    """An axis label: 0s, 1.5s, 2m, 1m30s, 2h."""
    if seconds < 60:
        return f"{seconds:.3f}".rstrip("0").rstrip(".") + "s"
    m, sec = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{sec}s" if sec else f"{m}m"
    h, m = divmod(m, 60)
    return f"{h}h{m}m" if m else f"{h}h"


def _tick_step(axis: Axis) -> float:
    span = axis.end - axis.start
    want = max(1, axis.cols // 10)  # a label every ~10 columns at most
    for step in NICE_STEPS:
        if span / step <= want:
            return step
    return NICE_STEPS[-1] * max(1, int(span / NICE_STEPS[-1] / want) + 1)


def _scale(axis: Axis, label_w: int) -> list[Text]:
    step = _tick_step(axis)
    labels = [" "] * (axis.cols + 8)
    rule = Row(axis.cols)
    rule.span(0, axis.cols - 1, "─", "dim", 1)
    k, last_end = 0, -1
    while k * step <= axis.end - axis.start + 1e-9:
        col = axis.col(axis.start + k * step)
        rule.put(col, "┼" if 0 < col < axis.cols - 1 else ("├" if col == 0 else "┤"), "dim", 2)
        label = short_time(k * step)
        if col > last_end and col + len(label) <= axis.cols:
            labels[col:col + len(label)] = list(label)
            last_end = col + len(label)
        k += 1
    rule.put(axis.cols - 1, "┤", "dim", 2)
    head = Text(" " * label_w + "".join(labels[:axis.cols]).rstrip(), style="dim")
    line = Text(" " * label_w)
    line.append_text(rule.text())
    return [head, line]


def _label(seid: str, label_w: int) -> str:
    name = seid if len(seid) <= label_w - 2 else seid[: label_w - 3] + "…"
    return f" {name:<{label_w - 1}}"


def _times(a: dict[str, Any], now: float) -> tuple[float, float]:
    t0, t1 = parse_iso(a["startTime"]), parse_iso(a["endTime"])
    return (now if t0 is None else t0), (now if t1 is None else t1)


def last_sign_of_life(a: dict[str, Any], t0: float, t1: float) -> float:
    """When a LOST attempt's process was last heard of (its last heartbeat or Stream write, else
    its start): it died then, and was declared lost only at a deadline. Any other attempt: its end."""
    if a["outcome"] != "LOST":
        return t1
    return min(t1, max(t0, parse_iso(a["lastHeartbeatTime"]) or t0))


def _step_rows(st: dict[str, Any], axis: Axis, label_w: int, streams: dict[str, list[dict[str, Any]]],
               off_axis: list[str], used: set[str]) -> list[Text]:
    bars, marks = Row(axis.cols), Row(axis.cols)
    seid = st["stepExecutionId"]
    prev_end: float | None = None
    prev_method = None
    own = [parse_iso(m["createdTime"]) or axis.start for msgs in streams.values() for m in msgs
           if m["source"] == f"#{seid}"]
    for a in st["attempts"]:
        t0, t1 = _times(a, axis.end)
        if prev_end is not None:  # a wait between wait_for and execute, else a backoff gap
            waited = prev_method == "WAIT_FOR" and a.get("method") == "EXECUTE"
            glyph, style = ("~", "dim cyan") if waited else ("·", "dim yellow")
            bars.span(axis.col(prev_end), axis.col(t0), glyph, style, 1)
        alive = last_sign_of_life(a, t0, t1)
        if alive < t1:  # its process died: nothing ran from its last sign of life to being declared lost
            bars.span(axis.col(alive), axis.col(t1), "╌", "dim red", 2)
        bars.span(axis.col(t0), axis.col(alive), "━", BAR_STYLE.get(a["outcome"], "red"), 2)
        bars.put(axis.col(t1), *END_GLYPH.get(a["outcome"], ("?", "")), 3)
        beat = parse_iso(a["lastHeartbeatTime"])
        # a Stream write is an implicit heartbeat: its time is the last heartbeat's too, and it
        # is drawn as the message it was; the heart marks only an explicit heartbeat
        if a["heartbeats"] and beat is not None and not any(abs(beat - m) < 0.001 for m in own):
            marks.put(axis.col(beat), "♥", "magenta", 1)
        prev_end, prev_method = t1, a.get("method")
    if st["status"] == "WAITING" and prev_end is not None:
        bars.span(axis.col(prev_end) + 1, axis.cols - 1, "~", "dim cyan", 1)
    if st["status"] == "BACKOFF" and prev_end is not None:
        nxt = parse_iso(st.get("nextAttemptTime")) or axis.end
        bars.span(axis.col(prev_end) + 1, axis.col(min(nxt, axis.end)), "·", "dim yellow", 1)
    for t in own:
        marks.put(axis.col(t), "●", "blue", 2)
    _deadline_marks(st, axis, marks, off_axis)
    head = Text(_label(seid, label_w), style="bold" if st["status"] == "RUNNING" else "")
    head.append_text(bars.text())
    out = [head]
    used.update(bars.glyphs())
    if not marks.empty:
        out.append(Text(" " * label_w) + marks.text())
        used.update(marks.glyphs())
    return out


def _deadline_marks(st: dict[str, Any], axis: Axis, marks: Row, off_axis: list[str]) -> None:
    """E at each attempt's ExecuteMethodTimeout, T at the step's TotalDuration, where they fall
    on the axis; the running step's deadlines past the axis are listed instead."""
    opts = st["options"]
    total = (parse_iso(st["scheduledTime"]) or axis.start) + opts["totalDuration"]
    method = None
    for a in st["attempts"]:
        method = (parse_iso(a["startTime"]) or axis.start) + opts["executeMethodTimeout"]
        if axis.holds(method):
            marks.put(axis.col(method), "E", "bold blue", 3)
    if axis.holds(total):
        col = axis.col(total)
        if marks.cells[col][0] == "E":  # both deadlines in one column: T just before E
            col -= 1
        marks.put(col, "T", "bold magenta", 4)
    if st["status"] not in ("RUNNING", "BACKOFF", "QUEUED"):
        return
    later = []
    if method is not None and st["status"] == "RUNNING" and method > axis.end:
        later.append(f"ExecuteMethodTimeout +{format_duration(method - axis.start)}")
    if total > axis.end:
        later.append(f"TotalDuration +{format_duration(total - axis.start)}")
    if later:
        off_axis.append(f"{st['stepExecutionId']} past the axis: " + ", ".join(later))


def attempt_label(st: dict[str, Any], a: dict[str, Any]) -> str:
    """`#2/3`; for a step with a wait_for, which method the attempt ran (`wait_for #1/∞`,
    `execute #1/3`): each numbers its attempts from 1 under its own retry policy."""
    if "waitFor" not in st:
        return f"#{a['attempt']}/{st['maxAttempts'] or '∞'}"
    if a.get("method") == "WAIT_FOR":
        return f"wait_for #{a['attempt']}/{st['waitFor'].get('maxAttempts') or '∞'}"
    return f"execute #{a['attempt']}/{st['maxAttempts'] or '∞'}"


def _attempt_notes(st: dict[str, Any], axis: Axis) -> list[Text]:
    """A line for each attempt of a step that did not complete at its first attempt: how it
    ended and why (the last NOTES_PER_STEP of them)."""
    attempts = st["attempts"]
    if len(attempts) == 1 and attempts[0]["outcome"] == "COMPLETED":
        return []
    out = []
    if len(attempts) > NOTES_PER_STEP:
        out.append(Text(f" {st['stepExecutionId']}: {len(attempts) - NOTES_PER_STEP} earlier attempts "
                        "not listed (dex inspect lists them all)", style="dim"))
    for a in attempts[-NOTES_PER_STEP:]:
        t0, t1 = _times(a, axis.end)
        glyph, style = END_GLYPH.get(a["outcome"], ("?", ""))
        line = Text(f" {glyph} ", style=style)
        line.append(f"{st['stepExecutionId']} {attempt_label(st, a)} ")
        alive = last_sign_of_life(a, t0, t1)
        if a["outcome"] == "RUNNING":
            line.append(f"running for {format_duration(t1 - t0)}")
        elif alive < t1:
            line.append(f"lost at +{format_duration(t1 - axis.start)}: last sign of life "
                        f"+{format_duration(alive - axis.start)}")
        else:
            line.append(f"{a['outcome'].lower().replace('_', ' ')} at +{format_duration(t1 - axis.start)}, "
                        f"ran {format_duration(t1 - t0)}")
        if a["errorType"]:  # the class name: `dex inspect` shows the qualified one
            line.append(f"  {a['errorType'].rsplit('.', 1)[-1]}: {a['detail']}", style=style)
        if a["heartbeats"]:
            line.append(f"  {a['heartbeats']} heartbeat{'s' if a['heartbeats'] > 1 else ''}", style="dim")
        out.append(line)
    return out


def _foreign_stream_rows(snap: dict[str, Any], axis: Axis, label_w: int, used: set[str]) -> list[Text]:
    """Stream messages not written by a step of this flow (a client's), one row per Stream."""
    seids = {f"#{st['stepExecutionId']}" for st in snap["steps"]}
    out = []
    for name, msgs in snap["streams"].items():
        row = Row(axis.cols)
        for m in msgs:
            if m["source"] not in seids:
                row.put(axis.col(parse_iso(m["createdTime"]) or axis.start), "●", "blue", 1)
        if not row.empty:
            out.append(Text(_label(name, label_w), style="dim") + row.text())
            used.add("●")
    return out


def _child_label(child_id: str, parent_id: str) -> str:
    """`↳Split-1-0` for the child `SubFlow:<parent>-Split-1-0`."""
    return "↳" + child_id.removeprefix(f"SubFlow:{parent_id}-")


def _subflow_rows(snap: dict[str, Any], axis: Axis, label_w: int, now: float, used: set[str]) -> list[Text]:
    """A row per child flow (SubFlow) this flow's waits started: from its start to its end."""
    out = []
    for child in snap.get("subFlows") or []:
        t0 = parse_iso(child["startTime"]) or now
        t1 = parse_iso(child["closeTime"]) or now
        row = Row(axis.cols)
        row.span(axis.col(t0), axis.col(t1), "═", "magenta", 1)
        glyph, style = SUBFLOW_END.get(child["flowStatus"], ("·", "dim"))
        row.put(axis.col(t1), glyph, style, 3)
        used.update(row.glyphs())
        label = _child_label(child["flowId"], snap["summary"]["flowId"])
        line = Text(_label(label, label_w), style="magenta")
        line.append_text(row.text())
        out.append(line)
    return out


def _key(used: set[str], width: int) -> list[Text]:
    """The meaning of each glyph the picture uses, wrapped at `width`."""
    lines, line = [], Text(" key ", style="dim")
    for glyph, what in KEY:
        if glyph not in used:
            continue
        item = f" {glyph} {what} "
        if line.cell_len + len(item) > width:
            lines.append(line)
            line = Text("     ", style="dim")
        line.append(item, style="dim")
    lines.append(line)
    return lines
