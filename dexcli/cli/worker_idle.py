"""What `dex worker --until-idle` says about waiting: while it waits (the engine's `idleWait`
event: attempts of processes that are gone, until their deadlines; attempts live processes
hold; retries backing off), and, once idle, the flows it leaves waiting for a timer or an
outside event — idle means nothing can run here until one of those happens."""

from __future__ import annotations

import time
from typing import Any

from dexcli.cli.config import clock_time, format_duration, parse_iso
from dexcli.store import Store

LISTED = 5  # flows or attempts named in one line


def _names(entries: list[dict[str, Any]]) -> str:
    names = [f"{e['stepExecutionId']} of flow {e['flowId']} (attempt {e['attempt']})" for e in entries[:LISTED]]
    more = len(entries) - LISTED
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _until(entries: list[dict[str, Any]]) -> str:
    """` until 21:46:03 (in 58 s)`: the first of the entries' times."""
    timed = [(t, e["at"]) for e in entries if (t := parse_iso(e["at"])) is not None]
    if not timed:
        return ""
    at, text = min(timed)
    return f" until {clock_time(text)} (in {format_duration(max(0.0, at - time.time()))})"


def idle_wait_lines(data: dict[str, Any]) -> list[str]:
    """The lines of one idleWait event."""
    skip = " · --time-skip skips this wait" if data.get("skippable") else ""
    out = []
    if data["lost"]:
        out.append(f"waiting{_until(data['lost'])} for {_names(data['lost'])}, whose process is gone, to time out: "
                   f"then it is declared lost and retried{skip}")
    if data["held"]:
        owners = sorted({e["owner"] for e in data["held"]})
        out.append(f"waiting while another process ({', '.join(owners)}) runs {_names(data['held'])}")
    if data["retries"]:
        out.append(f"waiting{_until(data['retries'])} for the retry of {_names(data['retries'])}{skip}")
    return out


def left_waiting(store: Store, skipped: dict[str, str], *, skipping: bool) -> list[str]:
    """Once idle: the running flows left here (but those `skipped`: this process cannot load
    their code), each with what it waits for; `skipping`: the drive skipped idle time."""
    from dexcli.cli.render_wait import active_of, idle_without_steps, no_start_step_text, summary
    from dexcli.cli.shared import store_now
    from dexcli.engine.views import inspect_flow

    ids = [f for f in store.running_flow_ids() if f not in skipped]
    if not ids:
        return []
    what = "an outside event (an RPC, a skip-timer)" if skipping else "a timer or an outside event"
    out = [f"{len(ids)} flow(s) left waiting for {what}:"]
    for fid in ids[:LISTED]:
        now = store_now(store, fid)
        snap = inspect_flow(store, fid, now)
        parts = []
        for step in snap["steps"]:
            seid, status = step["stepExecutionId"], step["status"]
            active = active_of(snap, seid)
            if status == "WAITING" and active is not None:
                parts.append(f"{seid} waiting for {summary(snap, active, now)}")
            elif status == "QUEUED" and step.get("nextAttemptTime"):
                parts.append(f"{seid} starts at {clock_time(step['nextAttemptTime'])} (a start delay)")
        if not parts and idle_without_steps(snap):
            parts.append(no_start_step_text(fid))
        elif not parts and not snap["summary"].get("timeout"):
            parts.append("idle (dead end) until it is stopped or an RPC starts a step")
        out.append(f"  {fid}: " + ("; ".join(parts) or "its flow timeout"))
    if len(ids) > LISTED:
        out.append(f"  and {len(ids) - LISTED} more (dex list --status RUNNING)")
    out.append("  they run when that happens: a worker without --until-idle waits for them"
               + ("" if skipping else "; --time-skip jumps to their timers"))
    return out
