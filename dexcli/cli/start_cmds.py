"""`dex start`: start a flow and leave it for whoever drives it (`dex worker`, `dex resume`,
another terminal, a script), as Temporal's `workflow start` does.

It is `dex run` without the drive: the same flags where they apply (the start input, the flow
id, start options, attributes, a flow plugin's run options), checked by run's own helpers, and
the engine's own start. The start step is queued, not leased: nothing waits for this process.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from typer.core import TyperCommand

from dexcli.cli.app import open_store
from dexcli.cli.flow_config_flags import CONFIG_OPTION
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


class StartCommand(TyperCommand):
    """`dex start` takes the flow plugins' `dex run` options too (added when it is used)."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        from dexcli.cli.plugin_cmds import add_run_options

        add_run_options(self)
        return super().make_context(info_name, args, parent, **extra)


def start(
    ctx: typer.Context,
    flow: str | None = typer.Argument(None, help="A flow name from `dex flows` (e.g. polling); with --file, "
                                                 "which flow of its Registry."),
    file: str | None = FILE_OPTION,
    flow_id: str | None = FLOW_ID_OPTION,
    input: str | None = INPUT_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print the started flow's summary as JSON."),
    timeout: str | None = TIMEOUT_OPTION,
    timeout_policy: str | None = TIMEOUT_POLICY_OPTION,
    start_delay: str | None = START_DELAY_OPTION,
    id_reuse_policy: str | None = ID_REUSE_OPTION,
    request_id: str | None = REQUEST_ID_OPTION,
    attribute: list[str] | None = ATTRIBUTE_OPTION,
    config: list[str] | None = CONFIG_OPTION,
) -> None:
    """Start a flow without driving it and print its id; `dex worker` (or `dex resume ID`) runs it.

    Nothing of the flow runs in this process: its first step waits, queued, for a process that
    drives the database's flows."""
    from dexcli.cli.driver import build_engine
    from dexcli.cli.flow_config_flags import with_config
    from dexcli.cli.inputs import read_input
    from dexcli.cli.loader import load_flow
    from dexcli.cli.plugin_cmds import run_option_values
    from dexcli.cli.run_cmds import (
        _check_values,
        _checked_definition,
        _flow_id,
        _run_plugin,
        _start,
        parse_faults,
    )
    from dexcli.cli.start_options import start_options
    from dexcli.engine.views import flow_summary

    options = start_options(timeout, timeout_policy, start_delay, id_reuse_policy, request_id)
    options = with_config(options, config)
    flow_obj, ref = load_flow(flow, file)
    start_input = read_input(input)
    given = run_option_values(ctx)
    _check_values(given)
    store = open_store()
    try:
        engine = build_engine(store, time_skip=False, attribute_stores=True)
        definition = _checked_definition(engine, flow_obj, parse_faults(None, None, None), flow, start_input,
                                         input is not None)
        plugin = _run_plugin(None if file else flow, definition, given)
        options = with_attributes(options, definition, attribute or [])
        fid = _flow_id(flow_id, definition)
        _start(engine, flow_obj, ref, fid, start_input, plugin, given, options, lease=False)
        row = store.get_flow(fid)
    finally:
        store.close()
    assert row is not None  # just started, in this process's transaction
    if json_out:
        print(json.dumps(flow_summary(row), indent=2))
        return
    print(fid, flush=True)  # alone on stdout: `id=$(dex start polling)`
    print(f"dex: started {fid} ({row.flow_type}): `dex worker` runs it, `dex watch {fid}` follows it",
          file=sys.stderr)
