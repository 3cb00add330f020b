"""`dex top`'s screen: the status counts, then the running flows (those in trouble first), each
with its open steps — attempt, heartbeat age, what it waits for — and, in red, what is wrong
(overdue: nothing drives it; orphaned: its attempt's process is gone). Every line is cut to the
width and the screen to the height (80x24 shows the counts and about eight flows).
Reads an `engine.overview.overview` dict; nothing here reads the database.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dexcli.cli import render_locks as rl
from dexcli.cli import render_wait as rw
from dexcli.cli.config import clock_time, format_duration, parse_iso
from dexcli.cli.render import STATUS_STYLE, STEP_GLYPH, due_in

STATUS_ORDER = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED")


def _fit(text: Text, width: int) -> Text:
    text.no_wrap = True
    text.truncate(width, overflow="ellipsis")
    return text


def title(ov: dict[str, Any], db: str, quit_hint: bool, width: int) -> Text:
    """`dex top · 21:47:20 UTC · q quits · /path/to/dex.db`; a long path loses its start, not its name."""
    t = Text("dex top", style="bold")
    t.append(f" · {clock_time(ov['now'])} UTC", style="dim")
    if quit_hint:
        t.append(" · q quits", style="dim")
    room = width - t.cell_len - 3
    if len(db) > room > 8:
        db = "…" + db[len(db) - room + 1:]
    t.append(f" · {db}", style="dim")
    return t


def counts(ov: dict[str, Any]) -> Text:
    t = Text(f"{ov['total']} flow(s): ")
    shown = STATUS_ORDER + (("CONTINUED_AS_NEW",) if ov["counts"].get("CONTINUED_AS_NEW") else ())
    for i, status in enumerate(shown):
        if i:
            t.append(" · ", style="dim")
        n = ov["counts"].get(status, 0)
        t.append(f"{n} {status.lower()}", style=STATUS_STYLE.get(status, "") if n else "dim")
    return t


def _step_text(st: dict[str, Any], flow: dict[str, Any], now: float) -> str:
    max_a = st["maxAttempts"] or "∞"
    status = st["status"]
    if status == "RUNNING":
        r = st["running"]
        beat = (f"heartbeat {format_duration(r['secondsSinceHeartbeat'])} ago" if st["lastHeartbeatTime"]
                else "no heartbeat yet")
        return f"attempt {st['attempt']}/{max_a} · running {format_duration(r['secondsRunning'])} · {beat}"
    if status == "WAITING":
        active = rw.active_of(flow, st["stepExecutionId"])
        since = parse_iso((st.get("waitFor") or {}).get("startTime"))
        kind = rw.kind_text(active and active.get("waitingCondition")) or "wait"
        return f"waiting ({kind})" + (f" for {format_duration(now - since)}" if since is not None else "")
    if status == "BACKOFF":
        last = st["attempts"][-1]["errorType"] if st["attempts"] else None
        after = f" (after {last})" if last else ""
        when = due_in(st.get("secondsToNextAttempt") or 0.0, "in", "due for")
        return f"retry: attempt {st['attempt'] + 1}/{max_a} {when}{after}"
    lock = rl.lock_wait_text(st)
    if lock:
        return f"queued, {lock}"
    due = st.get("secondsToNextAttempt") or 0.0
    return f"queued, starts in {format_duration(due)}" if due > 0 else "queued"


def _waits(st: dict[str, Any], flow: dict[str, Any], now: float) -> list[str]:
    """What a waiting step waits for, a line each: its timers, then its channels."""
    active = rw.active_of(flow, st["stepExecutionId"]) if st["status"] == "WAITING" else None
    if active is None:
        return []
    wait = active.get("waitingCondition") or {"conditions": []}
    return ([rw.timer_text(t, now) for t in active["timers"]] +
            [rw.channel_text(c, flow) for c in wait["conditions"] if c["kind"] == "channel"])


def _problems(st: dict[str, Any], flow: dict[str, Any]) -> list[str]:
    """What is wrong with a step: overdue (nothing drives the flow) or orphaned (its process is gone)."""
    seid, out = st["stepExecutionId"], []
    late = flow["overdue"]
    if late and late["stepExecutionId"] == seid:
        out.append(f"! overdue {format_duration(late['seconds'])}, nothing drives it: "
                   f"dex resume {flow['summary']['flowId']}")
    if seid in flow["orphaned"]:
        left = st["running"]["secondsHeartbeatLeft"]
        when = f"lost in {format_duration(left)}" if left > 0 else "lost"
        out.append(f"! orphaned: its process is gone; {when}, then retried")
    return out


def flow_lines(flow: dict[str, Any], width: int) -> list[Text]:
    s = flow["summary"]
    now = parse_iso(flow["now"]) or 0.0
    started = parse_iso(s["startTime"]) or now
    head = Text(s["flowId"], style="bold cyan")
    head.append(f"  {s['flowType']} · running {format_duration(now - started)}", style="dim")
    if flow["clockOffset"]:
        head.append(f" · clock +{format_duration(flow['clockOffset'])}", style="yellow")
    lines = [head]
    for st in flow["steps"]:
        glyph, style = STEP_GLYPH.get(st["status"], ("?", ""))
        line = Text(f"  {glyph} ", style=style)
        line.append(st["stepExecutionId"], style="bold")
        line.append(f"  {_step_text(st, flow, now)}")
        lines.append(line)
        lines += [Text(f"      {w}", style="magenta") for w in _waits(st, flow, now)]
        lines += [Text(f"    {p}", style="bold red") for p in _problems(st, flow)]
    if not flow["steps"]:
        lines.append(Text("  (no step in progress)", style="dim"))
    return [_fit(ln, width) for ln in lines]


def screen(ov: dict[str, Any], db: str, width: int, height: int, quit_hint: bool = False) -> list[Text]:
    """The whole screen, at most `height` lines of at most `width` cells."""
    lines = [_fit(title(ov, db, quit_hint, width), width), _fit(counts(ov), width)]
    if not ov["running"]:
        return lines + [Text("no running flows", style="dim")]
    lines.append(Text(""))
    room = max(0, height - len(lines) - 1)  # one line kept for "N more"
    shown = 0
    for flow in ov["running"]:
        block = flow_lines(flow, width)
        if len(block) > room:
            break
        lines += block
        room -= len(block)
        shown += 1
    more = len(ov["running"]) - shown + ov["runningNotShown"]
    if more:
        lines.append(_fit(Text(f"… {more} more running: dex list --status RUNNING", style="dim"), width))
    return lines[:height]
