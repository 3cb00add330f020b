"""`dex config FLOW [--set KEY=VALUE ...]` (Client.update_flow_config) and `dex continue-as-new
FLOW` (Client.trigger_continue_as_new): a running flow's FlowConfig, and rolling its run over.

`dex config FLOW` shows the run's FlowConfig, each field in the form `--config` and `--set` take
(dexcli.cli.flow_config_flags), those the run sets marked; with `--set` it merges those fields into
the running flow's (FlowConfigUpdated in its history) and prints the result. `dex continue-as-new`
ends the run CONTINUED_AS_NEW and prints the new run's id. A missing flow exits 3, a closed one 4,
as `dex stop`; a bad --set is exit 2 before the database opens. Both change the flow through the
engine's own change (Engine.change), as `dex stop` and `dex time-travel` do.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store
from dexcli.cli.completion import complete_flow_id, complete_running_flow_id
from dexcli.cli.errors import ConflictError
from dexcli.cli.flow_config_flags import CONFIG_HELP, FIELDS, config_rows, kebab, parse_config
from dexcli.cli.shared import flow_or_not_found

if TYPE_CHECKING:
    from dexcli.store import FlowRecord, Store

SET_HELP = "Change a field of the running flow's FlowConfig; repeatable. " + CONFIG_HELP.split("; repeatable: ")[1]


def config(
    flow_id: str = typer.Argument(..., help="The flow whose FlowConfig to show or change.",
                                  autocompletion=complete_flow_id),
    set_: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE",
        help=SET_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print {flowId, runId, flowConfig} as JSON "
                                                        "(flowConfig as `dex inspect --json`'s state.flowConfig)."),
) -> None:
    """Show a flow's FlowConfig, or change a running flow's with --set (Client.update_flow_config)."""
    from dexcli.cli.driver import build_engine
    from dexcli.engine import UpdateFlowConfig
    from dexcli.engine.flow_config import config_fields

    update = parse_config(set_, "--set")
    fields = config_fields(update, "--set") if update is not None else None
    store = open_store(must_exist=True)
    try:
        flow = flow_or_not_found(store, flow_id)
        if fields is not None:
            _running(store, flow, "only a running flow's config can change")
            # with dex.toml's Attribute Stores: the engine refuses a name it does not define
            engine = build_engine(store, time_skip=False, attribute_stores=True)
            _changed(store, flow_id, lambda: engine.change(UpdateFlowConfig(flow_id, fields)))
            after = flow_or_not_found(store, flow_id)
        else:
            after = flow
    finally:
        store.close()
    _show(after, fields, json_out, [f for f in FIELDS if update is not None and getattr(update, f) is not None])
    if fields is not None and after.run_id != flow.run_id:
        print(f"dex: the update reached the continue-as-new threshold: flow {flow_id} continued as new, run "
              f"{after.run_id} (run {flow.run_id} is kept)", file=sys.stderr)


def continue_as_new(
    flow_id: str = typer.Argument(..., help="The running flow to roll over.",
                                  autocompletion=complete_running_flow_id),
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in the closed run's FlowClosed and the "
                                                             "new run's history)."),
    run_id: str | None = typer.Option(None, "--run-id", metavar="RUN",
                                      help="The run to roll over: refused unless it is the current one."),
    yes: bool = typer.Option(False, "--yes", help="The Dex CLI's confirmation (dex does not ask)."),
    json_out: bool = typer.Option(False, "--json", help="Print {flowId, previousRunId, runId} as JSON."),
) -> None:
    """Continue a running flow as new now (Client.trigger_continue_as_new) and print the new run id.

    The run ends CONTINUED_AS_NEW and a new run of the same flow id goes on with its open steps,
    attributes, pending messages and outputs; its history starts again. The old run stays readable
    (dex inspect FLOW --run-id RUN). With --run-id, as `dex time-travel`: refused (exit 4, nothing
    changed) unless RUN is the flow's current run."""
    from dexcli.cli.driver import build_engine
    from dexcli.engine import ContinueAsNew

    del yes  # the Dex CLI's confirmation: accepted, nothing to confirm here
    if reason is not None and not reason.strip():
        from dexcli.cli.errors import UsageError

        raise UsageError("--reason must not be empty")
    store = open_store(must_exist=True)
    try:
        flow = flow_or_not_found(store, flow_id)
        _running(store, flow, "only a running flow can continue as new")  # (--run-id: checked in the change)
        op = ContinueAsNew(flow_id, run_id=run_id) if reason is None else ContinueAsNew(flow_id, reason, run_id)
        new_run: str = _changed(store, flow_id, lambda: build_engine(store, time_skip=False).change(op))
    finally:
        store.close()
    if json_out:
        print(json.dumps({"flowId": flow_id, "previousRunId": flow.run_id, "runId": new_run}, indent=2))
        return
    print(new_run)  # alone on stdout: `run=$(dex continue-as-new ID)`
    print(f"flow {flow_id}: continued as new, run {new_run}; run {flow.run_id} is kept (dex inspect {flow_id} "
          f"--run-id {flow.run_id}); a running `dex worker` drives the new one, or: dex resume {flow_id}",
          file=sys.stderr)


def _running(store: Store, flow: FlowRecord, what: str) -> None:
    """A closed flow is exit 4, as `dex stop` refuses one."""
    if not flow.is_running:
        raise ConflictError(f"flow {flow.flow_id} is already {flow.status.value}: {what}")


def _changed(store: Store, flow_id: str, change: Any) -> Any:
    """Run the engine's change; a flow that closed since it was read is exit 4, not 3."""
    from dexcli.sdk.errors import FlowEndedError, FlowNotActiveOrNotFoundError

    try:
        return change()
    except FlowNotActiveOrNotFoundError as exc:
        if isinstance(exc, FlowEndedError) or store.get_flow(flow_id) is None:
            raise
        raise ConflictError(str(exc)) from None


def _show(flow: FlowRecord, update: dict[str, Any] | None, json_out: bool, changed: list[str]) -> None:
    from dexcli.engine.views import FLOW_CONFIG_DEFAULTS

    if json_out:
        out: dict[str, Any] = {"flowId": flow.flow_id, "runId": flow.run_id,
                               "flowConfig": {**FLOW_CONFIG_DEFAULTS, **flow.config}}
        if update is not None:
            out["update"] = update
        print(json.dumps(out, indent=2))
        return
    rows = config_rows(flow.config)
    width = max(len(key) for key, _, _ in rows)
    print(f"flow {flow.flow_id} · run {flow.run_id} · {flow.status.value}")
    for key, value, is_set in rows:
        print(f"  {key.ljust(width)}  {value}{'' if is_set else '  (default)'}")
    if update is not None:
        print(f"dex: updated {', '.join(kebab(f) for f in changed)} (FlowConfigUpdated in dex inspect {flow.flow_id})",
              file=sys.stderr)
