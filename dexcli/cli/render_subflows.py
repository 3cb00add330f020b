"""The SubFlow links of a flow snapshot: its parent (a child names the step execution whose
wait started it) and its children with their status, for `dex inspect` and the live view."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dexcli.cli.shown import shown

GLYPH = {"COMPLETED": ("✓", "green"), "RUNNING": ("▶", "cyan"), "FAILED": ("✗", "red"),
         "CANCELED": ("⊘", "yellow"), "TERMINATED": ("✗", "red")}


def subflow_lines(snap: dict[str, Any]) -> list[Text]:
    """` Parent:  ID (step X)` for a child; ` SubFlows:` and a line per child for a parent."""
    s = snap["summary"]
    out = []
    parent = s.get("parentFlowId")
    if parent:
        t = Text(" Parent:  ", style="bold")
        t.append(shown(parent), style="cyan")
        t.append(f"  (started by its step {shown(s.get('parentStepExecutionId') or '?')}: a SubFlow)", style="dim")
        out.append(t)
    children = snap.get("subFlows") or []
    if children:
        out.append(Text(f" SubFlows ({len(children)})", style="bold"))
    for c in children:
        glyph, style = GLYPH.get(c["flowStatus"], ("·", "dim"))
        t = Text(f"   {glyph} ", style=style)
        t.append(shown(c["flowId"]), style="bold")
        t.append(f"  {c['flowType']}  ")
        t.append(c["flowStatus"], style=style)
        t.append(f"  from {shown(c.get('stepExecutionId') or '?')}", style="dim")
        out.append(t)
    return out
