"""`dex`: run, watch and inspect Dex flows on this machine.

This module is the table of contents: it registers each command, in the order `dex --help`
lists them (flow plugins' commands come after `flows`, see dexcli.cli.plugin_cmds). Each
command parses its arguments, makes one call into the engine or the store, and renders.
"""

from __future__ import annotations

from dexcli.cli import admin_cmds, read_cmds, run_cmds, wait_cmds
from dexcli.cli.app import app

app.command()(run_cmds.run)
app.command()(run_cmds.resume)
app.command()(run_cmds.worker)
app.command()(run_cmds.watch)
app.command()(read_cmds.inspect)
app.command("list")(read_cmds.list_flows)
app.command()(read_cmds.flows)
app.command()(run_cmds.stop)
app.command()(wait_cmds.wait)
app.command()(read_cmds.doctor)
app.command()(admin_cmds.init)


def _register_optional() -> None:
    try:
        from dexcli.cli.graph_cmds import register
    except ImportError:
        return
    register(app)


_register_optional()


def main() -> None:
    app()


__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
