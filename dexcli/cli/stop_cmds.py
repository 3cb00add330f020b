"""`dex stop`: one flow by id (run_cmds.stop), or every running flow a visibility query matches
(`--query`, the language of `dex list --query`), after a count and a confirmation.

Many flows are stopped one transaction each, by the engine's own stop: a flow that closed
meanwhile is reported and skipped, the rest go on. Asking needs a terminal: without one (a
script, a pipe) the command refuses unless --yes says it was meant.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import typer

from dexcli.cli.app import open_store
from dexcli.cli.completion import complete_running_flow_id
from dexcli.cli.errors import UsageError

if TYPE_CHECKING:
    from dexcli.store import FlowRecord, Store

STOP_KINDS = {"cancel": "CANCEL", "terminate": "TERMINATE", "fail": "FAIL"}
LISTED = 10  # the flows named before asking; the rest are counted


def stop(
    flow_id: str | None = typer.Argument(None, autocompletion=complete_running_flow_id,
                                         help="The flow to stop (or --query for many)."),
    type_: str = typer.Option("cancel", "--type", help="cancel, terminate or fail."),
    reason: str | None = typer.Option(None, "--reason"),
    query: str | None = typer.Option(
        None, "--query", "-q", metavar="QUERY",
        help="Stop every RUNNING flow this visibility query matches (as `dex list --query`), "
             "e.g. \"FlowType = 'PollingFlow'\"; asks first."),
    yes: bool = typer.Option(False, "--yes", "-y", help="With --query: do not ask (needed without a terminal)."),
    json_out: bool = typer.Option(False, "--json", help="With --query: print {stopped, skipped} as JSON."),
) -> None:
    """Stop a running flow (CANCELED, TERMINATED, or FAILED with CLIENT_API_FAILED), or with --query many."""
    if query is None:
        if flow_id is None:
            raise UsageError("name the flow to stop, or pass --query to stop every running flow it matches")
        if yes or json_out:
            raise UsageError("--yes and --json go with --query")
        from dexcli.cli.run_cmds import stop as stop_one

        stop_one(flow_id, type_, reason)
        return
    if flow_id is not None:
        raise UsageError("give a flow id or --query, not both")
    kind = STOP_KINDS.get(type_.lower())
    if kind is None:
        raise UsageError("--type must be cancel, terminate or fail")
    store = open_store(must_exist=True)
    try:
        running, closed = _matching(store, query)
        if not running:
            _report([], [], kind, json_out, f"no running flows match{_closed_note(closed)}")
            return
        _confirm(running, closed, kind, yes)
        stopped, skipped = _stop_all(store, [f.flow_id for f in running], kind, reason)
    finally:
        store.close()
    _report(stopped, skipped, kind, json_out, f"stopped {len(stopped)} flow(s) ({kind.lower()}){_closed_note(closed)}")


def _matching(store: Store, query: str) -> tuple[list[FlowRecord], int]:
    """The running flows the query matches (every page), and how many closed ones it matched."""
    from dexcli.cli.list_view import declared_search_keys
    from dexcli.store.search import MAX_PAGE_SIZE, search_flows

    running: list[FlowRecord] = []
    closed, token = 0, ""
    while True:
        page = search_flows(store, query, MAX_PAGE_SIZE, token, declared=declared_search_keys)
        for hit in page.hits:
            if hit.flow.is_running:
                running.append(hit.flow)
            else:
                closed += 1
        token = page.next_page_token
        if not token:
            return running, closed


def _closed_note(closed: int) -> str:
    return f" ({closed} closed one(s) left as they are)" if closed else ""


def _confirm(running: list[FlowRecord], closed: int, kind: str, yes: bool) -> None:
    """Name what would stop; ask on a terminal. Without one, only --yes goes ahead."""
    if yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise UsageError(f"--query matches {len(running)} running flow(s); nothing stopped: no terminal to ask, "
                         "pass --yes to stop them")
    names = ", ".join(f.flow_id for f in running[:LISTED])
    more = f" and {len(running) - LISTED} more" if len(running) > LISTED else ""
    print(f"{len(running)} running flow(s) match{_closed_note(closed)}: {names}{more}", file=sys.stderr)
    if not typer.confirm(f"{kind.lower().capitalize()} {len(running)} flow(s)?", default=False, err=True):
        print("nothing stopped", file=sys.stderr)
        raise typer.Exit(0)  # a no is an answer, not a failure


def _stop_all(store: Store, flow_ids: list[str], kind: str, reason: str | None) -> tuple[list[str], list[str]]:
    """Stop each flow; one that closed since the search is skipped."""
    from dexcli.cli.driver import build_engine
    from dexcli.engine import StopFlow
    from dexcli.sdk.errors import FlowNotActiveOrNotFoundError

    engine = build_engine(store, time_skip=False)
    stopped, skipped = [], []
    for fid in flow_ids:
        try:
            engine.change(StopFlow(fid, kind, reason))
        except FlowNotActiveOrNotFoundError:
            skipped.append(fid)
        else:
            stopped.append(fid)
    return stopped, skipped


def _report(stopped: list[str], skipped: list[str], kind: str, json_out: bool, summary: str) -> None:
    if json_out:
        print(json.dumps({"stopped": stopped, "skipped": skipped, "type": kind}, indent=2))
        return
    for fid in stopped:
        print(f"flow {fid} stopped ({kind.lower()})")
    for fid in skipped:
        print(f"flow {fid} had closed already: skipped")
    print(summary)
