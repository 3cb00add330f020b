"""`dex time-travel`: a new run of a flow from a point of its history (Client.time_travel).

The friendly flags, one point each:

    --to-start            the beginning (BEGINNING)
    --to-step X           the latest execution of step type X (STEP_TYPE), or with an execution id
                          like X-2 that one (STEP_EXECUTION_ID, its wait_for unless --step-method)
    --at TIME             the first history event at or after TIME (HISTORY_EVENT_TIME)

and the Dex CLI's own (`dexcli flow time-travel`): `--type beginning|history-event-time|step-type|
step-execution-id [--target V] [--step-method wait-for|execute]`, with `--run-id` (when given,
it must be the flow's current run) and `--yes` (its confirmation; dex does not ask). Prints the
new run id (`--json`: the Dex CLI's {flowId, previousRunId, runId}).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime

import typer

from dexcli.cli.app import open_store
from dexcli.cli.completion import complete_flow_id
from dexcli.cli.errors import UsageError
from dexcli.cli.shared import flow_or_not_found

DEX_TYPES = {"beginning": "BEGINNING", "history-event-time": "HISTORY_EVENT_TIME", "step-type": "STEP_TYPE",
             "step-execution-id": "STEP_EXECUTION_ID"}
METHODS = {"wait-for": "WAIT_FOR", "execute": "EXECUTE"}
EXECUTION_ID = re.compile(r"^(.+)-([1-9][0-9]*)$")


def time_travel(
    flow_id: str = typer.Argument(..., help="The flow to make a new run of.", autocompletion=complete_flow_id),
    to_step: str | None = typer.Option(None, "--to-step", metavar="STEP",
                                       help="A step type (its latest execution) or a step execution id (AwaitJob-2)."),
    step_method: str | None = typer.Option(None, "--step-method", metavar="METHOD",
                                           help="wait-for (the default: the step from its start) or execute "
                                                "(its wait_for's result kept)."),
    to_start: bool = typer.Option(False, "--to-start", help="From the beginning of the flow."),
    at: str | None = typer.Option(None, "--at", metavar="TIME",
                                  help="From the first history event at or after TIME (2026-01-01T10:00:05Z, "
                                       "on the flow's clock, as inspect shows it)."),
    type_: str | None = typer.Option(None, "--type", metavar="TYPE",
                                     help="The Dex CLI's form: beginning, history-event-time, step-type or "
                                          "step-execution-id (with --target)."),
    target: str | None = typer.Option(None, "--target", metavar="VALUE", help="With --type: its time, type or id."),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the new run's history)."),
    skip_writes_reapply: bool = typer.Option(
        False, "--skip-writes-reapply",
        help="Do not re-apply the RPCs (their attribute writes and publishes) that came after the point."),
    run_id: str | None = typer.Option(None, "--run-id", help="The Dex CLI's: the run to travel from (the current)."),
    yes: bool = typer.Option(False, "--yes", help="The Dex CLI's confirmation (dex does not ask)."),
    json_out: bool = typer.Option(False, "--json", help="Print {flowId, previousRunId, runId} as JSON."),
) -> None:
    """Make a new run of a flow from a point of its history (the old run is archived; see dex inspect --run-id)."""
    from dexcli.cli.driver import build_engine
    from dexcli.engine import TimeTravelRequest

    del yes  # the Dex CLI's confirmation: accepted, nothing to confirm here
    store = open_store(must_exist=True)
    try:
        flow = flow_or_not_found(store, flow_id)
        kind, value, method = _point(to_step, step_method, to_start, at, type_, target)
        if kind == "STEP_TYPE" and method is not None:  # friendly: that type's latest execution
            latest = [s.step_execution_id for s in store.steps_of(flow_id) if s.step_type == value]
            if latest:
                kind, value = "STEP_EXECUTION_ID", latest[-1]
            else:
                method = None  # the engine refuses the unknown type, in its words
        when = _time(value) if kind == "HISTORY_EVENT_TIME" else None
        req = TimeTravelRequest(
            flow_id, kind, when, value if kind == "STEP_TYPE" else None,
            value if kind == "STEP_EXECUTION_ID" else None,
            (method or "WAIT_FOR") if kind == "STEP_EXECUTION_ID" else None, reason, skip_writes_reapply, run_id)
        new_run = build_engine(store, time_skip=False).change(req)
    finally:
        store.close()
    if json_out:
        print(json.dumps({"flowId": flow_id, "previousRunId": flow.run_id, "runId": new_run}, indent=2))
        return
    print(new_run)
    print(f"flow {flow_id}: new run {new_run}; run {flow.run_id} is kept (dex inspect {flow_id} --run-id "
          f"{flow.run_id}); a running `dex worker` drives the new one, or: dex resume {flow_id}", file=sys.stderr)


def _point(to_step: str | None, step_method: str | None, to_start: bool, at: str | None, type_: str | None,
           target: str | None) -> tuple[str, str | None, str | None]:
    """(type, its value, step method) from whichever form the flags are in; one point only."""
    given = [f for f, v in (("--to-step", to_step), ("--to-start", to_start), ("--at", at), ("--type", type_)) if v]
    if len(given) != 1:
        raise UsageError("say where to travel to: one of --to-start, --to-step STEP, --at TIME or --type TYPE"
                         + (f" (not {' and '.join(given)})" if given else ""))
    method = None
    if step_method is not None:
        method = METHODS.get(step_method.lower())
        if method is None:
            raise UsageError("--step-method must be wait-for or execute")
    if target is not None and type_ is None:
        raise UsageError("--target goes with --type")
    if type_ is not None:
        kind = DEX_TYPES.get(type_.lower())
        if kind is None:
            raise UsageError("--type must be beginning, history-event-time, step-type or step-execution-id")
        if kind == "BEGINNING" and target is not None:
            raise UsageError("--type beginning takes no --target")
        if kind != "BEGINNING" and not target:
            raise UsageError(f"--type {type_.lower()} needs --target")
        if method is not None and kind != "STEP_EXECUTION_ID":
            raise UsageError("--step-method is only valid for --type step-execution-id")
        if kind == "STEP_EXECUTION_ID" and method is None:
            raise UsageError("--type step-execution-id needs --step-method wait-for or execute")
        return kind, target, method
    if to_start:
        if method is not None:
            raise UsageError("--step-method goes with --to-step")
        return "BEGINNING", None, None
    if at is not None:
        if method is not None:
            raise UsageError("--step-method goes with --to-step")
        return "HISTORY_EVENT_TIME", at, None
    assert to_step is not None
    if EXECUTION_ID.match(to_step):
        return "STEP_EXECUTION_ID", to_step, method or "WAIT_FOR"
    return "STEP_TYPE", to_step, method


def _time(text: str | None) -> float:
    try:
        when = datetime.fromisoformat((text or "").strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--at/--target {text!r} is not a time: give one like 2026-01-01T10:00:05Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()
