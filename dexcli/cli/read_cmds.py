"""The commands that only read: inspect, list, flows, doctor."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from dexcli.cli.app import open_store, out_console, store_now
from dexcli.cli.completion import complete_flow_id
from dexcli.cli.errors import NotFoundError, UsageError
from dexcli.cli.shared import MAX_LIST_LIMIT, flow_or_not_found
from dexcli.cli.shown import shown_data


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
    from dexcli.cli.list_view import show_list

    show_list(status, flow_type, limit, json_out, query, page_size, page_token, all_pages, continued)


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
