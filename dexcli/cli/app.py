"""The `dex` Typer app and what every command shares: the database, consoles, the error handler.

Commands live in run_cmds (run, resume, worker, watch, stop), wait_cmds (rpc, skip-timer),
read_cmds (inspect, list, flows, doctor), admin_cmds (init, time), time_travel_cmds (time-travel),
config_cmds (config, continue-as-new) and graph_cmds; main.py registers them in the order
`dex --help` lists them. Flow plugins (dexcli.plugins) add options to `dex run` and commands
of their own: DexGroup asks for them only when a command needs them (plugin_cmds), so
`dex list` or `dex inspect` never look for plugins.

Errors a user can cause are CliError, DexError or StoreError: one line on stderr, exit code on
the class.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer

from dexcli.cli.helptext import FullHelpGroup
from dexcli.cli.shared import (
    STATE,
    db_path,
    err_console,
    exit_for,
    open_store,
    out_console,
    print_error,
    refuse_undecodable,
    store_now,
    user_error_types,
    view_mode,
)

__all__ = ["STATE", "app", "db_path", "err_console", "open_store", "out_console", "store_now", "time_app",
           "user_error_types", "view_mode"]

# The one scheme of every command; each error class carries its code (exit_code), the handler
# (shared.exit_for) exits with it. README's "Exit codes" table says the same.
EXIT_CODES_HELP = ("Exit codes: 0 completed / ok · 1 the flow failed (FAILED, CANCELED or TERMINATED; an RPC handler "
                   "raised; a wait timed out), or doctor/lint found problems · 2 usage or bad input · 3 not found · "
                   "4 exists but closed or not in a state for that, or exists already · 5 environment: the database "
                   "is locked, read-only, damaged or the disk full · 70 internal error (a bug in dex) · "
                   "129 hung up (SIGHUP) · 130 interrupted · 137 injected crash · 141 output closed · "
                   "143 terminated (SIGTERM).")

ENVIRONMENT_HELP = ("Environment: DEX_DB database path · DEX_SYNCHRONOUS NORMAL or FULL · DEX_BUSY_TIMEOUT "
                    "seconds a write waits for another process's write lock (default 30; dex.toml: "
                    "busy_timeout) · DEX_DEBUG=1 a traceback with an internal error · NO_COLOR.")


def _click_exceptions() -> Any:
    try:  # typer >= 0.2x vendors click as typer._click
        from typer import _click

        return _click.exceptions
    except ImportError:  # pragma: no cover - older typer on the real click
        import click  # type: ignore[import-not-found, unused-ignore]

        return click.exceptions


def _hoist_global_options(args: list[str]) -> list[str]:
    """`--db PATH` is global; accept it after the command too (`dex inspect ID --db P`)."""
    if "--" in args:
        return args
    out, moved, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a == "--db" and i + 1 < len(args):
            moved += args[i:i + 2]
            i += 2
            continue
        if a.startswith("--db="):
            moved.append(a)
        else:
            out.append(a)
        i += 1
    return moved + out


def _closed_output_exit(e: SystemExit) -> None:
    """Typer ends a command whose stdout write failed with EPIPE (the reader went away, as in
    `dex list | head -1`) with exit 1; dex exits quietly with 141 instead, as everywhere else
    (see dexcli.cli.stopping)."""
    cause = e.__context__
    if e.code == 1 and isinstance(cause, OSError):
        from dexcli.cli.stopping import EXIT_OUTPUT_CLOSED, is_closed_pipe, silence_stdout

        if is_closed_pipe(cause):
            silence_stdout()
            sys.exit(EXIT_OUTPUT_CLOSED)


class DexGroup(FullHelpGroup):
    """The root command. Every user mistake, from every command, and click's own usage errors
    (unknown option, missing argument, bad value): one line on stderr, `dex: error: ...`, and
    the error's exit code. Plugin commands and `dex run`'s plugin options join on demand."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra)
        args = _hoist_global_options(list(sys.argv[1:] if args is None else args))
        refuse_undecodable(args)
        exc = _click_exceptions()
        abort = getattr(exc, "Abort", KeyboardInterrupt)  # not every vendored click has Abort
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except (KeyboardInterrupt, abort):
            print("dex: interrupted", file=sys.stderr)
            sys.exit(130)
        except SystemExit as e:
            _closed_output_exit(e)
            raise
        except exc.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except exc.ClickException as e:
            hint = ""
            ctx = getattr(e, "ctx", None)
            if isinstance(e, exc.UsageError) and ctx is not None:
                hint = f" (see `{ctx.command_path} --help`)"
            print_error(f"{e.format_message()}{hint}", e.exit_code)
        except Exception as e:
            exit_for(e)
        sys.exit(rv if isinstance(rv, int) else 0)

    def list_commands(self, ctx: Any) -> list[str]:
        from dexcli.cli.plugin_cmds import command_names

        return command_names(super().list_commands(ctx))

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)
        except _click_exceptions().UsageError as e:
            from dexcli.cli.familiar import with_hint

            e.message = with_hint(e.message, args[0]) if args else e.message
            raise

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and cmd_name != "run":
            return cmd  # a built-in command that takes nothing from plugins: no discovery
        from dexcli.cli.plugin_cmds import add_run_options, plugin_command

        if cmd is None:
            return plugin_command(cmd_name)
        add_run_options(cmd)
        return cmd


app = typer.Typer(
    name="dex",
    cls=DexGroup,
    help="Run and inspect Dex flows on one machine: durable steps, retries, heartbeats and "
         "checkpoints in SQLite, with a live terminal view.\n\n" + EXIT_CODES_HELP + "\n\n" + ENVIRONMENT_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
time_app = typer.Typer(help="Flows' clocks: show which were skipped ahead, skip or reset them.",
                       invoke_without_command=True, cls=FullHelpGroup)
app.add_typer(time_app, name="time")


def _version(value: bool) -> None:
    if value:
        from dexcli import __version__

        print(f"dex {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    db: str | None = typer.Option(None, "--db", help="Database path (else $DEX_DB, else dex.toml, else ~/.dex/dex.db).",
                                     envvar=None),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    STATE.db_flag = db
