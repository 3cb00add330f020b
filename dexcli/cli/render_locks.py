"""How a flow's attributes and attribute locks are shown: the Attributes and Locks panel of
`dex inspect`, a queued step waiting for a lock (the live view, the plain lines), and the locks a
running attempt holds. Reads the `state.attributes`, `state.locks` and the steps' `locksHeld` /
`waitingForLock` of a flow snapshot (the `dex inspect --json` dict).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from rich.text import Text

VALUE_LIMIT = 100  # characters of a value shown before it is cut with …


def key_text(key: str) -> str:
    """A lock's physical key as a user writes it: `settled_total`, or `notes[a b]` for an
    AttributeMap instance (stored as `notes/a%20b`)."""
    name, sep, instance = key.partition("/")
    return f"{name}[{unquote(instance)}]" if sep else name


def holder_text(holder: str | None) -> str:
    """`RecordSettlement-1` (a step execution), or `RPC settled` for `rpc:settled:<id>`."""
    if holder is None:
        return "nobody"
    if holder.startswith("rpc:"):
        return f"RPC {holder.split(':')[1]}"
    return holder


def lock_wait_text(step: dict[str, Any]) -> str | None:
    """`waiting for the lock on settled_total, held by RecordSettlement-1`, or None when the
    step does not wait for a lock."""
    wait = step.get("waitingForLock")
    if not wait:
        return None
    text = f"waiting for the lock on {key_text(wait['key'])}"
    if wait["holder"] is None:
        return text + " (free now: it takes it on its next try)"
    return f"{text}, held by {holder_text(wait['holder'])}"


def held_line(step: dict[str, Any]) -> Text | None:
    """The live view's line under a running step that holds locks."""
    held = step.get("locksHeld") or []
    if not held:
        return None
    line = Text("     locks       ")
    line.append(", ".join(key_text(k) for k in held), style="bold")
    line.append("  held while this attempt runs", style="dim")
    return line


def value_text(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_LIMIT else text[: VALUE_LIMIT - 1] + "…"


def attribute_lines(snap: dict[str, Any]) -> list[Text]:
    """`dex inspect`'s Attributes panel (name = value, name[instance] = value) and Locks panel
    (who holds each lock, who waits for it). Empty when the flow has neither."""
    state = snap.get("state", {})
    attrs: dict[str, Any] = state.get("attributes") or {}
    out: list[Text] = []
    if attrs:
        out.append(Text(" Attributes", style="bold"))
        for name, value in sorted(attrs.items()):
            if _is_map(snap, name):
                out += [_attribute_line(f"{name}[{k}]", v) for k, v in sorted(value.items())]
            else:
                out.append(_attribute_line(name, value))
    out += attribute_store_lines(snap)
    out += lock_lines(snap)
    return out


def attribute_store_lines(snap: dict[str, Any]) -> list[Text]:
    """The Attribute Store panel: each synced attribute, the stores its latest value is in, or
    why it is not there yet."""
    rows: list[dict[str, Any]] = snap.get("state", {}).get("attributeStore") or []
    if not rows:
        return []
    out = [Text(" Attribute Store", style="bold")]
    for p in rows:
        line = Text(f"   {p['key']} → ")
        stores = ", ".join(p["stores"])
        if p["status"] == "SYNCED":
            line.append(f"synced to {stores}" if stores else "not projected (the flow's FlowConfig names no store)")
        elif p["status"] == "FAILED":
            line.append(f"failed: {p['error']}", style="red")
        elif p["status"] == "SKIPPED":
            line.append(f"skipped: {p['error']}", style="yellow")
            if stores:
                line.append(f" (written to {stores})")
        else:
            tries = f", {p['attempts']} failed attempt{'s' if p['attempts'] != 1 else ''}" if p["attempts"] else ""
            line.append(f"pending{tries}", style="yellow")
            if p["error"]:
                line.append(f": {p['error']}")
        out.append(line)
    return out


def _is_map(snap: dict[str, Any], name: str) -> bool:
    return name in snap.get("state", {}).get("attributeMaps", [])


def _attribute_line(label: str, value: Any) -> Text:
    line = Text(f"   {label} = ")
    line.append(value_text(value), style="bold")
    return line


def lock_lines(snap: dict[str, Any]) -> list[Text]:
    """The Locks panel: each live lock, who holds it and who waits for it."""
    from dexcli.cli.config import clock_time

    locks = snap.get("state", {}).get("locks") or []
    waiters: dict[str, list[str]] = {}
    for st in snap.get("steps", []):
        if st.get("waitingForLock"):
            waiters.setdefault(st["waitingForLock"]["key"], []).append(st["stepExecutionId"])
    if not locks and not waiters:
        return []
    out = [Text(" Locks", style="bold")]
    for lock in locks:
        line = Text(f"   {key_text(lock['key'])}  ")
        line.append(f"held by {holder_text(lock['holder'])}", style="cyan")
        line.append(f" since {clock_time(lock['acquiredTime'])}", style="dim")
        if lock["holderKind"] == "rpc":
            line.append(f" ({lock['holder']}, expires {clock_time(lock['expiresTime'])})", style="dim")
        _append_waiters(line, waiters.pop(lock["key"], []))
        out.append(line)
    for key, seids in waiters.items():  # released since: each is taken on its waiter's next try
        line = Text(f"   {key_text(key)}  ")
        line.append("free", style="dim")
        _append_waiters(line, seids)
        out.append(line)
    return out


def _append_waiters(line: Text, seids: list[str]) -> None:
    if seids:
        line.append(" · waiting: " + ", ".join(seids), style="yellow")


def lock_wait_events(st: dict[str, Any], seen: dict[str, str]) -> list[str]:
    """The plain line of a step that began waiting for a lock (or for another holder of it)
    since `seen` (step execution id -> what was last printed) was updated."""
    text = lock_wait_text(st)
    seid = st["stepExecutionId"]
    if text is None:
        seen.pop(seid, None)
        return []
    if seen.get(seid) == text:
        return []
    seen[seid] = text
    return [f"· {seid} {text}"]
