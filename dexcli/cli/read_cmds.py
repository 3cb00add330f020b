"""The commands that only read: inspect, list, flows, doctor."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store, out_console, store_now
from dexcli.cli.completion import complete_flow_id
from dexcli.cli.errors import NotFoundError, UsageError
from dexcli.cli.shared import MAX_LIST_LIMIT, flow_or_not_found
from dexcli.cli.shown import shown, shown_data

if TYPE_CHECKING:
    from dexcli.store import FlowRecord

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "CONTINUED_AS_NEW")
LIST_HEADERS = ("flow id", "type", "status", "started (UTC)", "duration", "result / error")
SKIPPED = " skipped)"  # the end of a duration whose flow's clock was skipped ahead


def inspect(
    flow_id: str = typer.Argument(..., help="The flow to show.", autocompletion=complete_flow_id),
    json_out: bool = typer.Option(False, "--json", help="One JSON object: summary, steps, streams, history."),
    timeline: bool = typer.Option(False, "--timeline",
                                  help="Draw each step's attempts on one time axis instead."),
    svg: Path | None = typer.Option(None, "--svg", metavar="FILE",
                                    help="With --timeline: also write the picture as SVG to FILE."),
    history: bool = typer.Option(False, "--history",
                                 help="Every event with its whole payload (paged on a terminal; --json: the events)."),
    step: str | None = typer.Option(None, "--step", metavar="STEP",
                                    help="With --history: only the events of this step (AwaitJob-1 or AwaitJob)."),
    run_id: str | None = typer.Option(None, "--run-id", metavar="RUN",
                                      help="One run of the flow id: an earlier one (time travel, continue-as-new, "
                                           "id reuse) or the current one, as the Dex CLI's --run-id."),
) -> None:
    """Show everything about one flow: steps and every attempt, checkpoints, deadlines, Streams, history."""
    from dexcli.cli.quick import show_inspect

    if run_id is not None:
        flow_id = run_row_id(flow_id, run_id)

    if history or step is not None:
        _show_history(flow_id, step, json_out, history, timeline)
        return
    if svg is not None and not timeline:
        raise UsageError("--svg writes the timeline: add --timeline")
    if json_out and timeline:
        raise UsageError("--json and --timeline do not go together: choose one")
    if not timeline:
        show_inspect(flow_id, json_out)
        return
    from dexcli.engine.views import inspect_flow

    store = open_store(read_only=True)
    snap = inspect_flow(store, flow_id, store_now(store, flow_id))
    flow = store.get_flow(flow_id)
    _print_timeline(shown_data(snap), flow.clock_offset if flow is not None else 0.0, svg)


def run_row_id(flow_id: str, run_id: str) -> str:
    """The id of a run's rows: the flow id for its current run, `<flow_id>$<run_id>` for an
    earlier one (not found: exit 3)."""
    from dexcli.store import ARCHIVE_SEPARATOR

    store = open_store(read_only=True)
    try:
        current = store.get_flow(flow_id)
        if current is not None and current.run_id == run_id:
            return flow_id
        archived = f"{flow_id}{ARCHIVE_SEPARATOR}{run_id}"
        if store.get_flow(archived) is None:
            raise NotFoundError(f"flow {flow_id} has no run {run_id} in {store.path}")
        return archived
    finally:
        store.close()


def _show_history(flow_id: str, step: str | None, json_out: bool, history: bool, timeline: bool) -> None:
    from dexcli.cli.render_history import print_history, step_events
    from dexcli.engine.views import inspect_flow

    if not history:
        raise UsageError("--step filters the history: add --history")
    if timeline:
        raise UsageError("--history and --timeline do not go together: choose one")
    store = open_store(must_exist=True)
    snap = inspect_flow(store, flow_id, store_now(store, flow_id))
    events = snap["history"] if step is None else step_events(snap, step)
    if json_out:
        from dexcli.engine.inspect_json import history_json

        print(json.dumps(history_json(snap, events), indent=2))
    else:
        print_history(out_console(), events)


def _print_timeline(snap: dict[str, Any], offset: float, svg: Path | None) -> None:
    """The timeline at the terminal's width; with `svg`, the same lines as an SVG picture."""
    from dexcli.cli.timeline import timeline_lines

    console = out_console()
    lines = timeline_lines(snap, console.width, offset)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    if svg is None:
        return
    from dexcli.cli.timeline_svg import timeline_svg

    picture = timeline_svg(lines, console.width, f"dex inspect {snap['summary']['flowId']} --timeline")
    try:
        svg.write_text(picture, encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot write {svg}: {e.strerror or e}") from e
    print(f"dex: wrote {svg}", file=sys.stderr)


def list_flows(
    status: str | None = typer.Option(None, "--status", help="RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED or "
                                                              "CONTINUED_AS_NEW."),
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
    continued: bool = typer.Option(False, "--include-continued-as-new",
                                   help="With --query: also the earlier runs of continue-as-new chains."),
) -> None:
    """List flows, newest first; --query searches them with Dex's visibility query language."""
    if page_token and query is None:
        raise UsageError("--page-token continues a `dex list --query` listing: pass the --query that printed it")
    if query is not None or page_token or all_pages:
        if status is not None or flow_type is not None:
            raise UsageError("--query replaces --status and --type: say FlowStatus = '...' AND FlowType = '...'")
        _search(query or "", page_size, page_token, all_pages, json_out, continued)
        return
    from dexcli.engine.views import flow_summary

    if status is not None and status.upper() not in STATUSES:
        raise UsageError(f"--status must be one of {', '.join(STATUSES)}")
    store = open_store(read_only=True)
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
    from rich.text import Text

    from dexcli.cli.render import STATUS_STYLE

    console = out_console()
    # one line a flow, at any width: each column as wide as its widest cell, the result cut to
    # what is left (dex inspect has it all). Narrower: the start without its year and seconds
    # and "(+N)" for "(+N skipped)"; then no result, then no type, then no start.
    narrow = console.width < 120
    rows = [(*r[:3], *((r[3][5:16], r[4].replace(SKIPPED, ")")) if narrow else r[3:5]), r[5]) for r in cells]
    shown = {i: max(len(r[i]) for r in (LIST_HEADERS, *rows)) for i in range(len(LIST_HEADERS) - 1)}
    shown[5] = 8  # the least of the result worth showing
    for drop in (5, 1, 3):
        if sum(shown.values()) + 2 * (len(shown) - 1) <= console.width:
            break
        del shown[drop]
    if 5 in shown:
        shown[5] = console.width - sum(w for i, w in shown.items() if i != 5) - 2 * (len(shown) - 1)
    table = Table(box=None, pad_edge=False)
    for i, w in shown.items():
        table.add_column(LIST_HEADERS[i], no_wrap=True, min_width=w, max_width=w, overflow="ellipsis")
    for row in rows:
        styled = (*(Text(c) for c in row[:2]), Text(row[2], style=STATUS_STYLE.get(row[2], "")),
                  *(Text(c) for c in row[3:]))
        table.add_row(*(styled[i] for i in shown))
    console.print(table)
    if narrow and any(SKIPPED in r[4] for r in cells):
        console.print(" (+N): the flow's clock was skipped ahead N (time skipping; see dex time)", style="dim")


def _search(query: str, page_size: int, token: str, all_pages: bool, json_out: bool,
            continued: bool = False) -> None:
    """`dex list --query`: one page (or --all of them) from the store's search, no engine loaded."""
    from dexcli.store.search import search_flows

    store = open_store(read_only=True)
    hits, next_token = [], token
    while True:
        page = search_flows(store, query, page_size, next_token, declared=declared_search_keys,
                            include_continued_as_new=continued)
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


def declared_search_keys() -> set[str]:
    """The index keys the installed flows declare (a flow type that has not run yet has no rows):
    with the keys flows hold, the keys a query may name (Dex's server refuses an unregistered key too)."""
    from dexcli.cli.loader import known_flows, plugin_flow
    from dexcli.sdk.attributes import search_keys

    keys: set[str] = set()
    for plugin in known_flows().values():
        try:
            schema = plugin_flow(plugin).get_persistence_schema()
        except Exception:  # a plugin that does not load declares nothing here; `dex flows` says why
            continue
        keys |= search_keys(schema.attributes)
    return keys


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
    from dexcli.engine.views import flow_duration

    cells: list[tuple[str, ...]] = []
    for r in rows:
        info = r.error_message or ", ".join(brief_json(c["output"]) for c in json.loads(r.completions))
        ran = flow_duration(r)
        took = format_duration(now + r.clock_offset - r.start_time if ran is None else ran)
        if r.clock_offset:  # its clock was skipped: the start is real time, the duration the flow's
            took += f" (+{format_duration(r.clock_offset)}{SKIPPED}"
        cells.append((shown(r.flow_id), shown(r.flow_type), r.status.value,
                      datetime.fromtimestamp(r.start_time, tz=UTC).strftime("%Y-%m-%d %H:%M:%S"), took, shown(info)))
    return cells


def flows() -> None:
    """List the flows `dex run` knows by name."""
    from dexcli.cli.plugin_cmds import plugins

    rows = [(p.name, *p.target.partition(":")[::2], p.description) for p in plugins().plugins.values()]
    width = max((len(module) for _, module, _, _ in rows), default=0)  # module names vary in length
    for name, module, cls, description in rows:
        print(f"{name:<12} {cls:<16} {module:<{width}} {description}")


def doctor(flow_id: str | None = typer.Argument(None, help="Check one flow (default: all).")) -> None:
    """Check the database's invariants and report each breach (exit 1 if any; 5 if the file is damaged)."""
    from dexcli.cli.shared import warn_if_exposed
    from dexcli.engine.doctor import check

    store = open_store(read_only=True, warn=False)
    if flow_id is not None:
        flow_or_not_found(store, flow_id)
    problems, checked = check(store, flow_id)
    exposed = warn_if_exposed(store.path, warn=False)
    if exposed is not None:  # the one finding about the files, not the flows
        problems = [exposed, *problems]
    for p in problems:
        print(p)
    print(f"{checked} flow(s) checked, {len(problems)} problem(s)")
    raise typer.Exit(1 if problems else 0)
