"""`dex inspect ID --history`: every history event with its whole payload, one field a line (as
Temporal's `workflow show --detailed`), `--step` for one step's events; paged when it is longer
than the terminal (rich's pager: $PAGER, else less), never when stdout is not a terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

from dexcli.cli.errors import UsageError

HEADER_KEYS = ("eventId", "eventTime", "type", "stepExecutionId")  # on the event's first line
STEP_KEYS = ("stepExecutionId", "stepType", "startStepExecutionId", "startStepType", "recoveryStepExecutionId")
INDENT = "        "


def step_events(snap: dict[str, Any], step: str) -> list[dict[str, Any]]:
    """The events about a step, named by its execution id (AwaitJob-1) or its type (AwaitJob):
    its wait, its attempts, its timers, and a start or failure that names it."""
    known = {s["stepExecutionId"] for s in snap["steps"]} | {s["stepType"] for s in snap["steps"]}
    if step not in known:
        names = ", ".join(sorted(known)) or "none"
        raise UsageError(f"flow {snap['summary']['flowId']} has no step {step!r}; its steps: {names}")
    return [e for e in snap["history"] if step in (e.get(k) for k in STEP_KEYS)]


def _field(label: str, value: Any, indent: str, width: int) -> list[str]:
    """`label value` on one line when it fits; else an object one key a line and a list one
    item a line (`- `) below the label, each the same way, one level deeper."""
    compact = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(label) + 1 + len(compact) <= width or not isinstance(value, dict | list) or not value:
        return [f"{indent}{label} {compact}".rstrip()]
    lines = [f"{indent}{label}".rstrip()] if label else []
    deeper = indent + "  " if label else indent
    if isinstance(value, dict):
        for k, v in value.items():
            lines += _field(f"{k}:", v, deeper, width)
        return lines
    for item in value:
        first, *rest = _field("", item, deeper + "  ", width)
        lines += [f"{deeper}- {first.lstrip()}", *rest]
    return lines


def event_lines(e: dict[str, Any], width: int) -> list[Text]:
    when = e["eventTime"].replace("T", " ").rstrip("Z")
    head = Text(f"{e['eventId']:>5}  {when}  ")
    head.append(e["type"], style="bold")
    if "stepExecutionId" in e:
        head.append(f"  {e['stepExecutionId']}", style="cyan")
    lines = [head]
    for key, value in e.items():
        if key not in HEADER_KEYS:
            style = "dim" if value is None else ""
            lines += [Text(line, style=style) for line in _field(f"{key}:", value, INDENT, width)]
    return lines


def history_lines(events: list[dict[str, Any]], width: int) -> list[Text]:
    out: list[Text] = []
    for e in events:
        out += event_lines(e, width)
    return out or [Text("no events")]


def print_history(console: Console, events: list[dict[str, Any]]) -> None:
    """Print the events; through the pager when stdout is a terminal and they do not fit on it."""
    lines = history_lines(events, console.width)
    if console.is_terminal and sys.stdout.isatty() and len(lines) > console.height - 1:
        with console.pager(styles=False):
            for line in lines:
                console.print(line, soft_wrap=True)
        return
    for line in lines:
        console.print(line, soft_wrap=True)
