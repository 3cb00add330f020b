"""Flow plugins: how a flow package shows up in the `dex` command.

A package declares one `FlowPlugin` per flow and names it in its packaging metadata, in the
entry-point group `dex.flows`. The plugin gives the flow a name (`dex run NAME`, `dex flows`,
`dex graph NAME`), and may add options to `dex run` that set things up before the flow
starts, commands of its own, and hints for the live view. The examples in `flows/` use it:

    # pyproject.toml
    [project.entry-points."dex.flows"]
    polling = "dexcli_flows.plugins:POLLING"

    # flows/plugins.py
    from dexcli.plugins import Argument, Command, CommandContext, FlowPlugin, Option, RunContext

    def configure_job(run: RunContext) -> None:          # before the flow starts
        FakeJobService(run.host).configure_job(
            run.flow_id, duration_seconds=run.options["job_duration"], fails=run.options["job_fails"])

    def complete_job(ctx: CommandContext, flow_id: str | None) -> None:   # `dex complete-job [ID]`
        ...

    POLLING = FlowPlugin(
        name="polling",
        flow="dexcli_flows.polling:PollingFlow",     # a Flow class or instance, or "module:attr"
        description="Wait for a simulated external job.",
        run_options=(Option("--job-duration", "How long the job runs (default 6s).", kind="duration"),
                     Option("--job-fails", "The job ends FAILED.", kind="flag")),
        before_start=configure_job,
        commands=(Command("complete-job", complete_job, "Finish the simulated job early.",
                          arguments=(Argument("flow_id", "The flow (default: the one running).",
                                              required=False),)),),
        hints=("complete early:  dex complete-job {flow_id}",),
    )

Keep the module that defines a plugin light: `dex --help` imports it to list the plugin's
commands, so name the flow as "module:attr" (it is imported when it runs) and import heavy
code inside the functions. Code that needs the database gets a `dexcli.host.Host`: the
package's own state (kv) and the engine's clock, never the engine itself. A command or
`before_start` reports a user's mistake by raising `UsageError` (exit 2), `NotFoundError`
(exit 3) or `ConflictError` (exit 4): dex prints `dex: error: <message>` and exits with it.

This module imports neither typer, rich nor the engine; the CLI turns these declarations
into its options and commands (dexcli.cli.plugin_cmds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from dexcli.command_errors import CliError, ConflictError, NotFoundError, UsageError

if TYPE_CHECKING:
    from dexcli.host import Host

#: text: a string; flag: True when given; duration: seconds, written 3s, 2m, 1h30m; int: an integer.
OptionKind = Literal["text", "flag", "duration", "int"]
_KINDS = ("text", "flag", "duration", "int")


@dataclass(frozen=True)
class Option:
    """An option (`--job-duration`). Its value reaches code as `options[dest]`: None (False for a
    flag) when not given."""

    name: str
    help: str
    kind: OptionKind = "text"

    def __post_init__(self) -> None:
        if not self.name.startswith("--") or len(self.name) < 3 or " " in self.name:
            raise ValueError(f"option name must look like --some-name, got {self.name!r}")
        if self.kind not in _KINDS:
            raise ValueError(f"option {self.name}: kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")

    @property
    def dest(self) -> str:
        """The key of its value: `--job-duration` -> `job_duration`."""
        return self.name[2:].replace("-", "_")


@dataclass(frozen=True)
class Argument:
    """A positional argument of a command; the command's function gets it as the keyword `name`."""

    name: str
    help: str
    required: bool = True

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"argument name must be a Python identifier, got {self.name!r}")


class CommandContext(Protocol):
    """What a plugin's command gets from dex besides its arguments."""

    @property
    def host(self) -> Host:
        """The flow package's state in the dex database and the engine's clock. The database
        must exist (NotFoundError otherwise); it is opened on first use."""

    def running_flow_ids(self, flow_type: str) -> list[str]:
        """The ids of the RUNNING flows of this type, newest first."""

    def flow_status(self, flow_id: str) -> str | None:
        """The flow's status (RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED), or None when
        there is no flow with this id."""


@dataclass(frozen=True)
class Command:
    """A `dex` command of the plugin: `run(ctx, **arguments_and_options)` returns the exit code
    (None for 0). Options reach it by their `dest`."""

    name: str
    run: Callable[..., int | None]
    help: str
    arguments: tuple[Argument, ...] = ()
    options: tuple[Option, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "arguments", tuple(self.arguments))
        object.__setattr__(self, "options", tuple(self.options))


@dataclass(frozen=True)
class RunContext:
    """Given to `before_start` on `dex run` of the plugin's flow, once its id is chosen and
    before it starts. `options` holds every run option of the plugin, by dest."""

    flow_id: str
    host: Host
    options: Mapping[str, Any]


@dataclass(frozen=True)
class Hint:
    """A command the live view suggests while its flow runs; `while_step`: only while an
    execution of that step type is still open (so `complete-job` is not offered once the job
    step is done). `{flow_id}` in `text` is replaced."""

    text: str
    while_step: str | None = None

    def applies(self, steps: list[dict[str, Any]]) -> bool:
        """Whether to show it, given the `steps` of a `dex inspect --json` snapshot."""
        if self.while_step is None:
            return True
        return any(s["stepType"] == self.while_step and s["status"] in _OPEN for s in steps)


_OPEN = frozenset({"QUEUED", "RUNNING", "BACKOFF", "WAITING"})


@dataclass(frozen=True)
class FlowPlugin:
    name: str
    flow: Any  # a Flow subclass (created with no arguments), a Flow instance, or "module:attr"
    description: str = ""
    run_options: tuple[Option, ...] = ()
    before_start: Callable[[RunContext], None] | None = None
    commands: tuple[Command, ...] = ()
    hints: tuple[str | Hint, ...] = ()  # shown in the live view while its flow runs; {flow_id} replaced

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in ": /") or self.name.startswith("-"):
            raise ValueError(f"plugin name must be non-empty, without ':', '/' or spaces, got {self.name!r}")
        for f in ("run_options", "commands", "hints"):
            object.__setattr__(self, f, tuple(getattr(self, f)))

    @property
    def target(self) -> str:
        """Where the flow is, as `module:attr`."""
        if isinstance(self.flow, str):
            return self.flow
        cls = self.flow if isinstance(self.flow, type) else type(self.flow)
        return f"{cls.__module__}:{cls.__qualname__}"


__all__ = ["Argument", "CliError", "Command", "CommandContext", "ConflictError", "FlowPlugin", "NotFoundError",
           "Option", "OptionKind", "RunContext", "UsageError"]
