"""The commands that only read: inspect, list, flows, doctor."""

from __future__ import annotations

import io
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store, out_console, store_now
from dexcli.cli.completion import complete_flow_id
from dexcli.cli.errors import UsageError
from dexcli.cli.shared import flow_or_not_found

if TYPE_CHECKING:
    from dexcli.store import FlowRecord

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED")
MAX_LIST_LIMIT = 1_000_000  # a bound SQLite's LIMIT takes (it overflows past int64)
LIST_HEADERS = ("flow id", "type", "status", "started (UTC)", "duration", "result / error")


def inspect(
    flow_id: str = typer.Argument(..., help="The flow to show.", autocompletion=complete_flow_id),
    json_out: bool = typer.Option(False, "--json", help="One JSON object: summary, steps, streams, history."),
    timeline: bool = typer.Option(False, "--timeline",
                                  help="Draw each step's attempts on one time axis instead."),
    svg: Path | None = typer.Option(None, "--svg", metavar="FILE",
                                    help="With --timeline: also write the picture as SVG to FILE."),
) -> None:
    """Show everything about one flow: steps and every attempt, checkpoints, deadlines, Streams, history."""
    from dexcli.cli.quick import show_inspect

    if svg is not None and not timeline:
        raise UsageError("--svg writes the timeline: add --timeline")
    if json_out and timeline:
        raise UsageError("--json and --timeline do not go together: choose one")
    if not timeline:
        show_inspect(flow_id, json_out)
        return
    from dexcli.engine.views import inspect_flow

    store = open_store(must_exist=True)
    snap = inspect_flow(store, flow_id, store_now(store, flow_id))
    flow = store.get_flow(flow_id)
    _print_timeline(snap, flow.clock_offset if flow is not None else 0.0, svg)


def _print_timeline(snap: dict[str, Any], offset: float, svg: Path | None) -> None:
    """The timeline at the terminal's width; with `svg`, the same lines recorded into an SVG."""
    from rich.console import Console

    from dexcli.cli.timeline import timeline_lines

    console = out_console()
    lines = timeline_lines(snap, console.width, offset)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    if svg is None:
        return
    recorder = Console(record=True, width=console.width, file=io.StringIO(), force_terminal=True,
                       color_system="truecolor")
    for line in lines:
        recorder.print(line, highlight=False, soft_wrap=True)
    try:
        recorder.save_svg(str(svg), title=f"dex inspect {snap['summary']['flowId']} --timeline")
    except OSError as e:
        raise UsageError(f"cannot write {svg}: {e.strerror or e}") from e
    print(f"dex: wrote {svg}", file=sys.stderr)


def list_flows(
    status: str | None = typer.Option(None, "--status", help="RUNNING, COMPLETED, FAILED, CANCELED or TERMINATED."),
    flow_type: str | None = typer.Option(None, "--type", help="Only this flow type (e.g. PollingFlow)."),
    limit: int = typer.Option(20, "--limit", min=1, max=MAX_LIST_LIMIT, help="How many, newest first."),
    json_out: bool = typer.Option(False, "--json", help="JSON: a list of summaries (--query: {flows, nextPageToken})."),
    query: str | None = typer.Option(
        None, "--query", "-q", metavar="QUERY",
        help="Dex's visibility query, e.g. \"OrderStatus = 'paid' AND FlowStatus = 'RUNNING'\": =, !=, <, <=, >, >=, "
             "IN on FlowId, FlowType, FlowStatus, StartTime, CloseTime and indexed attributes; AND, OR, NOT, "
             "parentheses; ORDER BY key [ASC|DESC] (default StartTime DESC)."),
    page_size: int = typer.Option(50, "--page-size", min=1, max=1000, help="With --query: flows per page."),
    page_token: str = typer.Option("", "--page-token", help="With --query: the page after the one that printed it."),
    all_pages: bool = typer.Option(False, "--all", help="With --query: every page."),
) -> None:
    """List flows, newest first; --query searches them with Dex's visibility query language."""
    if query is not None or page_token or all_pages:
        if status is not None or flow_type is not None:
            raise UsageError("--query replaces --status and --type: say FlowStatus = '...' AND FlowType = '...'")
        _search(query or "", page_size, page_token, all_pages, json_out)
        return
    from dexcli.engine.views import flow_summary

    if status is not None and status.upper() not in STATUSES:
        raise UsageError(f"--status must be one of {', '.join(STATUSES)}")
    store = open_store(must_exist=True)
    from dexcli.store import FlowState

    rows = store.list_flows(FlowState(status.upper()) if status else None, flow_type, limit)
    if json_out:
        print(json.dumps([flow_summary(r) for r in rows], indent=2))
        return
    if not rows:
        print("no flows" + (" match" if status or flow_type else f" in {store.path}"))
        return
    _print_table(_list_cells(rows, store_now(store)))  # real time: each flow adds its own offset


def _print_table(cells: list[tuple[str, ...]]) -> None:
    if not sys.stdout.isatty():  # scripts and pipes: aligned plain text, no Rich layout to pay for
        widths = [max(len(str(row[i])) for row in (LIST_HEADERS, *cells)) for i in range(len(LIST_HEADERS) - 1)]
        for row in (LIST_HEADERS, *cells):
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + str(row[-1]))
        return
    from rich.table import Table

    from dexcli.cli.render import STATUS_STYLE

    table = Table(box=None, pad_edge=False)
    for col in LIST_HEADERS:
        table.add_column(col, overflow="fold")
    for row in cells:
        table.add_row(row[0], row[1], f"[{STATUS_STYLE.get(row[2], '')}]{row[2]}[/]", *row[3:])
    out_console().print(table)


def _search(query: str, page_size: int, token: str, all_pages: bool, json_out: bool) -> None:
    """`dex list --query`: one page (or --all of them) from the store's search, no engine loaded."""
    from dexcli.store.search import search_flows

    store = open_store(must_exist=True)
    hits, next_token = [], token
    while True:
        page = search_flows(store, query, page_size, next_token)
        hits += page.hits
        next_token = page.next_page_token
        if not all_pages or not next_token:
            break
    if json_out:
        print(json.dumps({"flows": [_search_entry(h.flow, h.indexed) for h in hits], "nextPageToken": next_token},
                         indent=2))
        return
    if hits:
        _print_table(_list_cells([h.flow for h in hits], store_now(store)))
    else:
        print("no flows match")
    if next_token:
        print(f"dex: more flows match: --page-token {next_token}", file=sys.stderr)


def _search_entry(flow: FlowRecord, indexed: dict[str, str]) -> dict[str, Any]:
    def iso(t: float | None) -> str | None:
        return None if t is None else datetime.fromtimestamp(t, tz=UTC).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")

    return {"flowId": flow.flow_id, "runId": flow.run_id, "flowType": flow.flow_type,
            "flowStatus": flow.status.value, "startTime": iso(flow.start_time), "closeTime": iso(flow.close_time),
            "indexedAttributes": {k: json.loads(v) for k, v in indexed.items()}}


def _list_cells(rows: list[FlowRecord], now: float) -> list[tuple[str, ...]]:
    from dexcli.cli.config import format_duration
    from dexcli.cli.render import brief_json

    cells: list[tuple[str, ...]] = []
    for r in rows:
        info = r.error_message or ", ".join(brief_json(c["output"]) for c in json.loads(r.completions))
        took = format_duration((r.close_time or now + r.clock_offset) - r.start_time)
        if r.clock_offset:  # its clock was skipped: the start is real time, the duration the flow's
            took += f" (+{format_duration(r.clock_offset)} skipped)"
        cells.append((r.flow_id, r.flow_type, r.status.value,
                      datetime.fromtimestamp(r.start_time, tz=UTC).strftime("%Y-%m-%d %H:%M:%S"), took, info))
    return cells


def flows() -> None:
    """List the flows `dex run` knows by name."""
    from dexcli.cli.plugin_cmds import plugins

    for p in plugins().plugins.values():
        module, _, cls = p.target.partition(":")
        print(f"{p.name:<12} {cls:<16} {module:<20} {p.description}")


def doctor(flow_id: str | None = typer.Argument(None, help="Check one flow (default: all).")) -> None:
    """Check the database's invariants and report each breach (exit 1 if any)."""
    from dexcli.engine.doctor import check

    store = open_store(must_exist=True)
    if flow_id is not None:
        flow_or_not_found(store, flow_id)
    problems, checked = check(store, flow_id)
    for p in problems:
        print(p)
    print(f"{checked} flow(s) checked, {len(problems)} problem(s)")
    raise typer.Exit(1 if problems else 0)
