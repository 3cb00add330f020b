"""`dex list` and `dex list --query`, without typer: what the typer command (dexcli.cli.read_cmds)
and the quick path (dexcli.cli.quick) both run. Rich loads only to draw the table on a terminal."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dexcli.cli.errors import UsageError
from dexcli.cli.shared import open_store, out_console, store_now
from dexcli.cli.shown import shown

if TYPE_CHECKING:
    from dexcli.store import FlowRecord

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED", "CONTINUED_AS_NEW")
LIST_HEADERS = ("flow id", "type", "status", "started (UTC)", "duration", "result / error")
SKIPPED = " skipped)"  # the end of a duration whose flow's clock was skipped ahead


def show_list(status: str | None, flow_type: str | None, limit: int, json_out: bool, query: str | None,
              page_size: int, page_token: str, all_pages: bool, continued: bool) -> None:
    """`dex list` with its options' values (typer has checked their types and ranges)."""
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
    from dexcli.cli.brief import brief_json
    from dexcli.cli.config import format_duration
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
