"""`dex`: run, watch and inspect Dex flows on this machine.

This module is the table of contents: it registers each command, in the order `dex --help`
lists them (flow plugins' commands come after `flows`, see dexcli.cli.plugin_cmds). Each
command parses its arguments, makes one call into the engine or the store, and renders.

The commands (and typer) load on first use of `app`: `dex inspect FLOW_ID [--json]` and `dex list` are served
by dexcli.cli.quick without them.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

_APP: list[typer.Typer] = []


def _register() -> typer.Typer:
    if _APP:
        return _APP[0]
    from dexcli.cli import (
        admin_cmds,
        attribute_wait_cmds,
        config_cmds,
        read_cmds,
        run_cmds,
        start_cmds,
        stop_cmds,
        time_travel_cmds,
        top_cmds,
        wait_cmds,
    )
    from dexcli.cli.app import app

    app.command()(run_cmds.run)
    app.command(cls=start_cmds.StartCommand)(start_cmds.start)
    app.command()(run_cmds.resume)
    app.command()(run_cmds.worker)
    app.command()(run_cmds.watch)
    app.command()(read_cmds.inspect)
    app.command("list")(read_cmds.list_flows)
    app.command()(top_cmds.top)
    app.command()(read_cmds.flows)
    app.command()(stop_cmds.stop)
    app.command()(config_cmds.config)
    app.command("continue-as-new")(config_cmds.continue_as_new)
    app.command()(wait_cmds.rpc)
    app.command("skip-timer")(wait_cmds.skip_timer)
    app.command("time-travel")(time_travel_cmds.time_travel)
    app.command()(attribute_wait_cmds.wait)
    app.command()(read_cmds.doctor)
    app.command()(admin_cmds.init)
    _register_optional(app)
    _APP.append(app)
    return app


def _register_optional(app: typer.Typer) -> None:
    try:
        from dexcli.cli.graph_cmds import register
    except ImportError:
        return
    register(app)


def __getattr__(name: str) -> Any:
    if name == "app":
        return _register()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    from dexcli.cli.quick import run

    run(sys.argv[1:])  # exits when it served the command
    _register()()


__all__ = ["app", "main"]  # noqa: F822 (app: __getattr__, on first use)

if __name__ == "__main__":
    main()
