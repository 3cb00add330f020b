"""The commands that drive or change flows: run, resume, worker, watch, stop.

`dex run` opens the database once and builds one engine: its registry holds the flow object
loaded from the command line, the same engine starts the flow and drives it (`Engine.drive`). Only
the live view opens a second connection, to show committed state from its own thread.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import err_console, open_store, out_console, store_now, view_mode
from dexcli.cli.completion import complete_flow_id, complete_flow_name, complete_running_flow_id
from dexcli.cli.errors import ConflictError, UsageError
from dexcli.cli.flow_config_flags import CONFIG_OPTION
from dexcli.cli.shared import flow_or_not_found
from dexcli.cli.shown import shown_data
from dexcli.cli.start_options import (
    ATTRIBUTE_OPTION,
    FILE_OPTION,
    FLOW_ID_OPTION,
    ID_REUSE_OPTION,
    INPUT_OPTION,
    REQUEST_ID_OPTION,
    START_DELAY_OPTION,
    TIMEOUT_OPTION,
    TIMEOUT_POLICY_OPTION,
    with_attributes,
)

if TYPE_CHECKING:
    from dexcli.engine import Engine
    from dexcli.engine.faults import Faults
    from dexcli.plugins import FlowPlugin
    from dexcli.sdk.flow import Flow
    from dexcli.sdk.registry import FlowDefinition
    from dexcli.sdk.results import StartFlowOptions


def parse_faults(crash_at: str | None, stall: str | None, fail: str | None) -> Faults:
    from dexcli.engine.faults import Faults

    try:
        return Faults.from_options(crash_at=crash_at, stall=stall, fail=fail)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def run(
    ctx: typer.Context,
    flow: str | None = typer.Argument(None, help="A flow name from `dex flows` (e.g. polling); with --file, "
                                                 "which flow of its Registry.",
                                      autocompletion=complete_flow_name),
    file: str | None = FILE_OPTION,
    flow_id: str | None = FLOW_ID_OPTION,
    input: str | None = INPUT_OPTION,
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event, then the inspect object."),
    time_skip: bool = typer.Option(False, "--time-skip",
                                   help="Skip idle waits: jump this flow's clock to its next deadline."),
    crash_after: str | None = typer.Option(None, "--crash-after",
                                           help="Kill this process (os._exit) after a duration, e.g. 3s."),
    crash_at: str | None = typer.Option(
        None, "--crash-at",
        help="Kill this process at a point: attempt-start, heartbeat[:N], stream-write[:N], before-commit, "
             "after-commit; narrow to a step with @Step (heartbeat:2@AwaitJob)."),
    stall: str | None = typer.Option(None, "--stall", help="STEP[:ATTEMPT]: that attempt hangs without heartbeats."),
    fail: str | None = typer.Option(None, "--fail",
                                    help="STEP[:N]: the first N attempts of STEP raise a transient error."),
    timeout: str | None = TIMEOUT_OPTION,
    timeout_policy: str | None = TIMEOUT_POLICY_OPTION,
    start_delay: str | None = START_DELAY_OPTION,
    id_reuse_policy: str | None = ID_REUSE_OPTION,
    request_id: str | None = REQUEST_ID_OPTION,
    attribute: list[str] | None = ATTRIBUTE_OPTION,
    config: list[str] | None = CONFIG_OPTION,
) -> None:
    """Start a flow and drive it to its end here, showing it live.

    Async steps are allowed, as under Dex's AsyncWorker (a Registry built with
    allow_async_handlers=True); the official SDK's own Registry refuses them by default."""
    from dexcli.cli.config import parse_duration
    from dexcli.cli.driver import build_engine, drive_flow
    from dexcli.cli.flow_config_flags import with_config
    from dexcli.cli.inputs import read_input
    from dexcli.cli.loader import load_flow
    from dexcli.cli.plugin_cmds import hints_for, run_option_values
    from dexcli.cli.start_options import start_options

    options = start_options(timeout, timeout_policy, start_delay, id_reuse_policy, request_id)
    options = with_config(options, config)
    flow_obj, ref = load_flow(flow, file)
    start_input = read_input(input)
    faults = parse_faults(crash_at, stall, fail)
    crash_after_s = parse_duration(crash_after, "--crash-after") if crash_after is not None else None
    given = run_option_values(ctx)
    _check_values(given)
    store = open_store()
    try:
        engine = build_engine(store, time_skip=time_skip, faults=faults, attribute_stores=True)
        definition = _checked_definition(engine, flow_obj, faults, flow, start_input, input is not None)
        plugin = _run_plugin(None if file else flow, definition, given)
        options = with_attributes(options, definition, attribute or [])
        fid = _flow_id(flow_id, definition)

        def start() -> None:  # once the view listens: --json begins with the flow's flowStarted
            _start(engine, flow_obj, ref, fid, start_input, plugin, given, options)

        code = drive_flow(engine, out_console(), fid, mode=view_mode(json_out), time_skip=time_skip,
                          crash_after=crash_after_s, err=err_console(), hints=hints_for(plugin, fid), start=start,
                          faults=faults)
    finally:
        store.close()
    raise typer.Exit(code)


def _checked_definition(engine: Any, flow_obj: Any, faults: Any, name: str | None, start_input: Any,
                        input_given: bool) -> Any:
    """Register the flow and check the run's flags and input against it (usage errors)."""
    from dexcli.cli.inputs import check_input
    from dexcli.engine.start_request import start_step_options

    definition = engine.definitions.registry.add(flow_obj)
    try:
        faults.check(definition)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_input(name or definition.flow_type, definition, start_input, given=input_given)
    if definition.start_step is not None:  # a start it refuses is one line, not a warning before it
        start_step_options(engine.definitions, definition, definition.start_step)
    _say_warnings(definition)
    return definition


def _say_warnings(definition: FlowDefinition) -> None:
    for w in definition.warnings:
        print(f"dex: warning: {w}", file=sys.stderr)


def _check_values(given: dict[str, Any]) -> None:
    """Parse the plugin options given (a bad duration is a usage error before anything opens)."""
    from dexcli.cli.plugin_cmds import owner_of, parse_value

    for dest, raw in given.items():
        owner = owner_of(dest)
        if owner is not None:
            parse_value(owner[1], raw)


def _run_plugin(name: str | None, definition: FlowDefinition, given: dict[str, Any]) -> FlowPlugin | None:
    """The flow plugin of this run: the one named, or with --file the one whose options were
    given, if its flow is the file's. Options of another plugin's flow are a usage error."""
    from dexcli.cli.loader import named_plugin, plugin_flow
    from dexcli.cli.plugin_cmds import only_for, owner_of

    plugin = named_plugin(name) if name else None
    for dest in given:
        found = owner_of(dest)
        if found is None:
            continue
        owner = found[0]
        if plugin is None and plugin_flow(owner).get_flow_type() == definition.flow_type:
            plugin = owner
        if owner is not plugin:
            raise only_for(owner)
    return plugin


def _flow_id(flow_id: str | None, definition: FlowDefinition) -> str:
    """The run's flow id: given (checked), or generated."""
    from dexcli.engine.start_request import check_flow_id, new_flow_id

    return new_flow_id(definition.flow_type) if flow_id is None else check_flow_id(flow_id)


def _start(engine: Engine, flow_obj: Flow[Any], ref: str, fid: str, start_input: Any,
           plugin: FlowPlugin | None, given: dict[str, Any], options: StartFlowOptions, lease: bool = True) -> None:
    """Start the flow, once the flow's plugin has set things up (the engine calls it when the
    start is not refused for its flow id); with `lease`, its first attempt is leased to this
    process; `dex start` leaves it queued for whoever drives it. A flow id that a flow has and
    the id reuse policy does not let a new run take is refused (exit 4)."""
    from dexcli.sdk.errors import FlowAlreadyStartedError

    setup = None
    if plugin is not None and plugin.before_start is not None:
        from dexcli.cli.plugin_cmds import options_of
        from dexcli.engine.host import StoreHost
        from dexcli.plugins import RunContext

        before_start, host = plugin.before_start, StoreHost(engine.store, engine.clock)

        def setup() -> None:
            before_start(RunContext(fid, host, options_of(plugin, given)))
    try:
        # this process drives the flow next: its first attempt is leased in the start's transaction
        engine.start_flow(flow_obj, fid, start_input, flow_ref=ref, options=options, lease=lease, setup=setup)
    except ValueError as exc:  # a start option the SDK refuses (a HANDLER policy without handle_timeout, ...)
        raise UsageError(str(exc)) from None
    except FlowAlreadyStartedError:
        existing = engine.store.get_flow(fid)
        status = f" ({existing.status.value})" if existing is not None else ""
        raise ConflictError(f"flow {fid} already exists{status}; choose another --flow-id, "
                            f"`dex inspect {fid}`, or an --id-reuse-policy that lets a new run take the id") from None


def resume(
    flow_id: str = typer.Argument(..., help="The flow to drive to its end.",
                                 autocompletion=complete_running_flow_id),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event, then the inspect object."),
    time_skip: bool = typer.Option(False, "--time-skip",
                                   help="Skip idle waits (including a lost attempt's heartbeat timeout)."),
) -> None:
    """Drive one flow to its end here (after a crash or Ctrl-C), with the live view."""
    from dexcli.cli.driver import build_engine, drive_flow, exit_code_for
    from dexcli.cli.plugin_cmds import hints_for, plugins

    store = open_store(must_exist=True)
    try:
        row = flow_or_not_found(store, flow_id)
        if not row.is_running:
            _show_ended(store, flow_id, json_out)
            raise typer.Exit(exit_code_for(row.status.value))
        engine = build_engine(store, time_skip=time_skip, attribute_stores=True)
        engine.check_runnable(flow_id)
        hints = hints_for(plugins().for_ref(row.flow_ref), flow_id)
        code = drive_flow(engine, out_console(), flow_id, mode=view_mode(json_out), time_skip=time_skip,
                          err=err_console(), hints=hints)
    finally:
        store.close()
    raise typer.Exit(code)


def _show_ended(store: Any, flow_id: str, json_out: bool) -> None:
    from dexcli.cli.render import final_card
    from dexcli.engine.inspect_json import dex_cli_json
    from dexcli.engine.views import inspect_flow

    snap = inspect_flow(store, flow_id, store_now(store, flow_id))
    if json_out:
        print(json.dumps(dex_cli_json(snap)))
    else:
        out_console().print(final_card(shown_data(snap)))
        print(f"(flow {flow_id} had already ended; nothing to resume)")


def worker(
    until_idle: bool = typer.Option(
        False, "--until-idle",
        help="Exit once nothing can run without a timer firing or an outside event (listing what waits)."),
    time_skip: bool = typer.Option(False, "--time-skip",
                                   help="Skip idle waits (moves the clocks of the flows it drives)."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event."),
    file: list[str] | None = typer.Option(
        None, "--file", metavar="PATH.py:NAME",
        help="Your flows, registered before the worker starts (for flows your own code starts): a Flow class "
             "or instance, or a function returning a Flow or a Registry. Repeatable."),
) -> None:
    """Drive every runnable flow in the database until interrupted (or idle)."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.loader import load_file_flows
    from dexcli.cli.worker_view import run_worker

    flows = [flow for spec in file or () for flow in load_file_flows(spec)]
    store = open_store()
    try:
        from dexcli.engine.process import process_owner

        owner = process_owner()
        engine = build_engine(store, time_skip=time_skip, owner=owner, attribute_stores=True)
        for flow in flows:
            _say_warnings(engine.definitions.registry.add(flow))
        code = run_worker(engine, out_console(), until_idle=until_idle, mode="json" if json_out else "lines",
                          owner=owner)
    finally:
        store.close()
    raise typer.Exit(code)


def watch(
    flow_id: str = typer.Argument(..., help="A flow another process is running.",
                                 autocompletion=complete_flow_id),
    json_out: bool = typer.Option(False, "--json", help="Print the inspect object when the flow ends."),
) -> None:
    """Follow a flow that another process drives (read-only); exit when it ends."""
    from dexcli.cli.driver import watch_flow
    from dexcli.cli.plugin_cmds import hints_for, plugins

    store = open_store(read_only=True)
    try:
        row = flow_or_not_found(store, flow_id)
        hints = hints_for(plugins().for_ref(row.flow_ref), flow_id)
        code = watch_flow(out_console(), store, flow_id, mode=view_mode(json_out), hints=hints)
    finally:
        store.close()
    raise typer.Exit(code)


def stop(
    flow_id: str = typer.Argument(..., autocompletion=complete_running_flow_id),
    type_: str = typer.Option("cancel", "--type", help="cancel, terminate or fail."),
    reason: str | None = typer.Option(None, "--reason"),
) -> None:
    """Stop a running flow (CANCELED, TERMINATED, or FAILED with CLIENT_API_FAILED)."""
    from dexcli.cli.driver import build_engine
    from dexcli.engine import StopFlow

    kinds = {"cancel": "CANCEL", "terminate": "TERMINATE", "fail": "FAIL"}
    if type_.lower() not in kinds:
        raise UsageError("--type must be cancel, terminate or fail")
    store = open_store(must_exist=True)
    try:
        flow_or_not_found(store, flow_id)
        build_engine(store, time_skip=False).change(StopFlow(flow_id, kinds[type_.lower()], reason))  # closed: exit 4
    finally:
        store.close()
    print(f"flow {flow_id} stopped ({kinds[type_.lower()].lower()})")
