"""How a waiting step is shown: what its Wait waits for (each timer with a countdown and its
firing time, each channel condition with queued/needed counts) and the commands that would
move it on (`dex rpc`, `dex skip-timer`). Reads the `state` of a flow snapshot (the
`dex inspect --json` dict); used by the live view, the plain lines and `dex inspect`.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dexcli.cli.config import format_duration


def _iso_seconds(s: str | None) -> float | None:
    from dexcli.cli.config import parse_iso

    return parse_iso(s)


def _clock(s: str | None) -> str:
    from dexcli.cli.config import clock_time

    return clock_time(s)


def active_of(snap: dict[str, Any], seid: str) -> dict[str, Any] | None:
    """The `state.activeStepExecutions` entry of a step execution, if it is in progress."""
    for a in snap.get("state", {}).get("activeStepExecutions", []):
        if a["stepExecutionId"] == seid:
            return dict(a)
    return None


def queued(snap: dict[str, Any], queue: str) -> int:
    return len(snap.get("state", {}).get("pendingChannelMessages", {}).get(queue, []))


def needed(c: dict[str, Any]) -> str:
    """What a channel condition needs: `1`, `2-5`, `at least 2`, `at most 3` messages."""
    lo, hi = c.get("atLeast"), c.get("atMost")
    if lo is not None and hi is not None:
        return str(lo) if lo == hi else f"{lo}-{hi}"
    if lo is not None:
        return f"at least {lo}"
    return "any" if hi is None else f"at most {hi}"


def timer_text(t: dict[str, Any], now: float) -> str:
    """`expire fires in 23 h 59 m (at 14:13:47)`, `expire fired`, `expire skipped`."""
    name = t["conditionId"] or f"#{t['conditionIndex']}"
    if t["status"] == "PENDING":
        at = _iso_seconds(t["firingTime"]) or now
        when = _clock(t["firingTime"])
        if at - now >= 12 * 3600:
            when = t["firingTime"][:10] + " " + when
        return f"timer {name} fires in {format_duration(at - now)} (at {when})"
    return f"timer {name} {t['status'].lower()}"


def channel_text(c: dict[str, Any], snap: dict[str, Any]) -> str:
    """`channel decisions: 0 queued, needs 1 (decision)`."""
    label = f" ({c['conditionId']})" if c.get("conditionId") else ""
    return f"channel {c['queue']}: {queued(snap, c['queue'])} queued, needs {needed(c)}{label}"


def skip_command(flow_id: str, seid: str, t: dict[str, Any]) -> str:
    which = f"--condition-id {t['conditionId']}" if t["conditionId"] else f"--index {t['conditionIndex']}"
    return f"dex skip-timer {flow_id} {seid} {which}"


def rpc_command(flow_id: str, rpcs: tuple[str, ...], flow_ref: str | None = None) -> str:
    """`dex rpc` for this flow; one started from a file needs that file named (--file)."""
    names = "|".join(rpcs) if rpcs else "NAME"
    command = f"dex rpc {flow_id} {names} --input JSON"
    kind, _, where = (flow_ref or "").partition(":")
    if kind != "file":
        return command
    import shlex

    from dexcli.graph.lint import short_path

    path, _, cls = where.rpartition(":")
    return f"{command} --file {shlex.quote(f'{short_path(path)}:{cls}')}"


def kind_text(wait: dict[str, Any] | None) -> str:
    return str((wait or {}).get("kind", "")).replace("_", " ")


def selected_ids(results: dict[str, Any] | None) -> list[str]:
    """The condition ids (`#index` without one) a completed wait selected."""
    return [c.get("conditionId") or f"#{c['index']}" for c in (results or {}).get("conditions", []) if c["selected"]]


def subflow_text(c: dict[str, Any], snap: dict[str, Any]) -> str:
    """A SubFlow condition: its child's type, id and (from the parent's list) status."""
    fid = c.get("flowId")
    status = next((k["flowStatus"] for k in snap.get("subFlows", ()) if k["flowId"] == fid), None)
    if c.get("result") is not None:
        status = c["result"]["status"]
    return f"{fid or 'SubFlow (starting)'} {c['flowType']}" + (f" {status}" if status else "")


def summary(snap: dict[str, Any], active: dict[str, Any], now: float) -> str:
    """One line: what a waiting step waits for."""
    wait = active.get("waitingCondition")
    if wait is None:
        return "wait_for is running"
    parts = [timer_text(t, now) for t in active["timers"]]
    parts += [channel_text(c, snap) for c in wait["conditions"] if c["kind"] == "channel"]
    parts += [subflow_text(c, snap) for c in wait["conditions"] if c["kind"] == "subflow"]
    return f"{kind_text(wait)}: " + " · ".join(parts) if parts else kind_text(wait)


def commands(snap: dict[str, Any], active: dict[str, Any], rpcs: tuple[str, ...]) -> list[str]:
    """The commands that would move a waiting step on."""
    fid, seid = snap["summary"]["flowId"], active["stepExecutionId"]
    wait = active.get("waitingCondition") or {"conditions": []}
    out = []
    if any(c["kind"] == "channel" for c in wait["conditions"]):
        out.append(rpc_command(fid, rpcs, snap["summary"].get("flowRef")))
    out += [skip_command(fid, seid, t) for t in active["timers"] if t["status"] == "PENDING"]
    return out


def waiting_lines(step: dict[str, Any], snap: dict[str, Any], now: float, rpcs: tuple[str, ...]) -> list[Text]:
    """The live view of a WAITING step."""
    seid = step["stepExecutionId"]
    head = Text(" ○ ", style="magenta")
    head.append(f"{seid:<24}", style="bold")
    active = active_of(snap, seid)
    wf = step.get("waitFor") or {}
    since = _iso_seconds(wf.get("startTime"))
    head.append(f"waiting ({kind_text(active and active.get('waitingCondition')) or 'wait'})")
    if since is not None:
        head.append(f" for {format_duration(now - since)}", style="dim")
    lines = [head]
    if active is None:
        return lines
    wait = active.get("waitingCondition") or {"conditions": []}
    for t in active["timers"]:
        lines.append(Text(f"     {timer_text(t, now)}", style="cyan" if t["status"] == "PENDING" else "dim"))
    for c in wait["conditions"]:
        if c["kind"] == "channel":
            lines.append(Text(f"     {channel_text(c, snap)}", style="cyan"))
        elif c["kind"] == "subflow":
            lines.append(Text(f"     {subflow_text(c, snap)}", style="cyan"))
    for cmd in commands(snap, active, rpcs):
        lines.append(Text(f"     → {cmd}", style="dim"))
    return lines


def only_external_input(snap: dict[str, Any]) -> bool:
    """Whether only someone else can move this running flow on: every step in progress
    waits, and no timer of theirs is pending."""
    if snap["summary"]["flowStatus"] != "RUNNING":
        return False
    active = snap.get("state", {}).get("activeStepExecutions", [])
    if not active or any(s["status"] in ("QUEUED", "RUNNING", "BACKOFF") for s in snap["steps"]):
        return False
    return all(a["phase"] == "WAITING" and a.get("waitingCondition") is not None
               and not any(t["status"] == "PENDING" for t in a["timers"])
               and not any(c["kind"] == "subflow" for c in a["waitingCondition"]["conditions"]) for a in active)


EXTERNAL_INPUT = "only external input can move this flow on now (an RPC, or a timer skipped): it waits"


def idle_without_steps(snap: dict[str, Any]) -> bool:
    """Whether this running flow has no step execution at all: it has no start step (every other
    start queues one) and no RPC has started a step yet."""
    return snap["summary"]["flowStatus"] == "RUNNING" and not snap["steps"]


def no_start_step_text(flow_id: str, rpcs: tuple[str, ...] = ()) -> str:
    """What a flow without a start step does while no step runs, and how to move it on."""
    call = " | ".join(f"dex rpc {flow_id} {name}" for name in rpcs) if rpcs else f"dex rpc {flow_id} NAME"
    return f"no start step: the flow answers RPCs ({call}) until one starts a step, it times out or is stopped"


def wait_events(st: dict[str, Any], snap: dict[str, Any], seen: dict[str, str],
                rpcs: tuple[str, ...]) -> list[tuple[float, str]]:
    """The plain lines of a step's wait that `seen` (step execution id -> the state last
    printed) has not had: it began waiting (what for, and how to move it on), it ended."""
    wf = st.get("waitFor")
    if wf is None:
        return []
    seid = st["stepExecutionId"]
    out: list[tuple[float, str]] = []
    begun = _iso_seconds(wf["startTime"])
    if begun is not None and seen.get(seid) is None:
        active = active_of(snap, seid)
        if active is not None and wf["outcome"] == "WAITING":
            now = _iso_seconds(snap["now"]) or begun
            out.append((begun, f"○ {seid} waiting for {summary(snap, active, now)}"))
            out += [(begun, f"  → {cmd}") for cmd in commands(snap, active, rpcs)]
        seen[seid] = "WAITING"
    ended = _iso_seconds(wf["endTime"])
    if ended is not None and seen.get(seid) != "ENDED":
        chosen = selected_ids(wf.get("conditionResults"))
        why = ", ".join(chosen) if chosen else "nothing selected"
        out.append((ended - 1e-6, f"✓ {seid} wait over ({wf['outcome'].lower()}): {why}"))
        seen[seid] = "ENDED"
    return out
