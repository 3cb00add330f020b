"""Flow plugins (dexcli.plugins) in the `dex` command: their `dex run` options, their commands.

`dex run` gets every installed plugin's run options, so that `dex run --help` lists them and
`dex run three-steps --job-fails` can say that option belongs to another flow. Their raw values
are kept on the click context (`run_option_values`) and checked by `dex run` itself, after the
flow is loaded, in the order it always checked them. Plugin commands are listed after
`dex flows` in `dex --help`.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperOption

from dexcli.cli.discovery import Installed, installed
from dexcli.cli.errors import UsageError
from dexcli.plugins import Argument, Command, FlowPlugin, Hint, Option

if TYPE_CHECKING:
    from dexcli.host import Host
    from dexcli.store import Store

_META = "dex.plugin_run_options"
_warned: set[int] = set()
_extended: weakref.WeakSet[Any] = weakref.WeakSet()  # `dex run` commands that have the options


def plugins() -> Installed:
    """The installed plugins; the first call in a process prints why any were skipped."""
    found = installed()
    if id(found) not in _warned:
        _warned.add(id(found))
        for w in found.warnings:
            print(f"dex: warning: {w}", file=sys.stderr)
    return found


def command_names(builtins: list[str]) -> list[str]:
    """The built-in commands with the plugins' inserted after `flows`. A plugin command named
    like a built-in one (or another plugin's) is ignored."""
    names = list(builtins)
    at = names.index("flows") + 1 if "flows" in names else len(names)
    extra: list[str] = []
    for p in plugins().plugins.values():
        for c in p.commands:
            if c.name in names or c.name in extra:
                print(f"dex: warning: command {c.name} of flow plugin {p.name!r} is ignored: the name is taken",
                      file=sys.stderr)
            else:
                extra.append(c.name)
    return names[:at] + extra + names[at:]


# ------------------------------------------------------------------------------ options
def parse_value(option: Option, raw: Any) -> Any:
    """A raw command-line value as the plugin gets it (None, or False for a flag, when not given)."""
    if raw is None or option.kind == "flag":
        return bool(raw) if option.kind == "flag" else None
    if option.kind == "duration":
        from dexcli.cli.config import parse_duration

        return parse_duration(raw, option.name)
    if option.kind == "int":
        try:
            value = int(raw)
        except ValueError:  # not digits, or more of them than Python converts
            raise UsageError(f"{option.name}: {raw!r} is not a whole number") from None
        if not -(2**63) <= value < 2**63:  # what SQLite and the official SDK's int64 hold
            raise UsageError(f"{option.name}: {raw!r} is out of range (a 64-bit integer)")
        return value
    return raw


def _click_option(option: Option, help: str, callback: Callable[..., Any] | None = None) -> TyperOption:
    flag = option.kind == "flag"
    return TyperOption(param_decls=[option.name, option.dest], type=bool if flag else str, is_flag=flag or None,
                       default=False if flag else None, help=help, callback=callback,
                       expose_value=callback is None, show_default=False)


def _keep_raw(ctx: Any, param: Any, value: Any) -> Any:
    ctx.meta.setdefault(_META, {})[param.name] = value
    return value


def add_run_options(run: Any) -> None:
    """Add every plugin's run options to the `dex run` command (once per command object)."""
    if run in _extended:
        return
    _extended.add(run)
    taken = {d for p in run.params for d in p.opts}
    added = []
    for plugin in plugins().plugins.values():
        for option in plugin.run_options:
            if option.name in taken:
                print(f"dex: warning: option {option.name} of flow plugin {plugin.name!r} is ignored: "
                      "dex run has it already", file=sys.stderr)
                continue
            taken.add(option.name)
            added.append(_click_option(option, f"[{plugin.name}] {option.help}", _keep_raw))
    if added:
        i = next((n for n, p in enumerate(run.params) if p.name == "help"), len(run.params))
        run.params[i:i] = added
        run.epilog = ("Options marked [NAME] come from the flow plugin NAME (see `dex flows`) and apply "
                      "to its flow only.")


def run_option_values(ctx: typer.Context) -> dict[str, Any]:
    """The raw values of the plugin options given to this `dex run` (by dest)."""
    raw: dict[str, Any] = ctx.meta.get(_META, {})
    return {k: v for k, v in raw.items() if v not in (None, False)}


def owner_of(dest: str) -> tuple[FlowPlugin, Option] | None:
    for plugin in plugins().plugins.values():
        for option in plugin.run_options:
            if option.dest == dest:
                return plugin, option
    return None


def options_of(plugin: FlowPlugin, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every run option of the plugin by dest, parsed (None/False when not given)."""
    return {o.dest: parse_value(o, given.get(o.dest)) for o in plugin.run_options}


def only_for(plugin: FlowPlugin) -> UsageError:
    names = [o.name for o in plugin.run_options]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return UsageError(f"{listed} appl{'ies' if len(names) == 1 else 'y'} to the {plugin.name} flow only")


# ------------------------------------------------------------------------------ commands
class CliCommandContext:
    """dexcli.plugins.CommandContext over this command line's database, opened on first use."""

    def __init__(self) -> None:
        self._store: Store | None = None
        self._host: Host | None = None

    def _open(self) -> Store:
        if self._store is None:
            from dexcli.cli.shared import open_store

            self._store = open_store(must_exist=True)
        return self._store

    @property
    def host(self) -> Host:
        if self._host is None:
            from dexcli.cli.driver import make_clock
            from dexcli.engine.host import StoreHost

            store = self._open()
            self._host = StoreHost(store, make_clock(False))
        return self._host

    def running_flow_ids(self, flow_type: str) -> list[str]:
        from dexcli.store import FlowState

        return [r.flow_id for r in self._open().list_flows(FlowState.RUNNING, flow_type, 1000)]

    def flow_status(self, flow_id: str) -> str | None:
        row = self._open().get_flow(flow_id)
        return None if row is None else row.status.value

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def _argument(arg: Argument) -> TyperArgument:
    """A plugin command's argument; one named `flow_id` completes recent running flow ids."""
    from dexcli.cli.completion import complete_running_flow_id

    return TyperArgument(param_decls=[arg.name], type=str, required=arg.required,
                         default=... if arg.required else None, help=arg.help, show_default=False,
                         autocompletion=complete_running_flow_id if arg.name == "flow_id" else None)


def _click_command(command: Command) -> TyperCommand:
    options = {o.dest: o for o in command.options}

    def callback(**values: Any) -> None:
        ctx = CliCommandContext()
        try:
            parsed = {k: parse_value(options[k], v) if k in options else v for k, v in values.items()}
            code = command.run(ctx, **parsed)
        finally:
            ctx.close()
        raise typer.Exit(code or 0)

    params: list[Any] = [_argument(a) for a in command.arguments]
    params += [_click_option(o, o.help) for o in command.options]
    return TyperCommand(command.name, callback=callback, params=params, help=command.help, rich_markup_mode=None)


def plugin_command(name: str) -> TyperCommand | None:
    for plugin in plugins().plugins.values():
        for command in plugin.commands:
            if command.name == name:
                return _click_command(command)
    return None


def hints_for(plugin: FlowPlugin | None, flow_id: str) -> tuple[Hint, ...]:
    """The plugin's hints for this flow, `{flow_id}` filled in."""
    if plugin is None:
        return ()
    return tuple(Hint(h.replace("{flow_id}", flow_id)) if isinstance(h, str) else
                 Hint(h.text.replace("{flow_id}", flow_id), h.while_step) for h in plugin.hints)
