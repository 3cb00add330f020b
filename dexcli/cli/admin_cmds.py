"""The commands about the setup rather than running a flow: init (dex.toml) and time (the flows' clocks)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dexcli.cli.app import open_store, time_app
from dexcli.cli.errors import ConflictError, UsageError
from dexcli.cli.shared import flow_or_not_found
from dexcli.cli.shown import shown

if TYPE_CHECKING:
    from dexcli.store import Store


def init(force: bool = typer.Option(False, "--force", help="Overwrite an existing dex.toml.")) -> None:
    """Write a commented dex.toml in this folder (its database: ./.dex/dex.db)."""
    import tomli_w

    from dexcli.cli.config import CONFIG_NAME, INIT_TEMPLATE

    path = Path.cwd() / CONFIG_NAME
    if path.exists() and not force:
        raise ConflictError(f"{path} exists (use --force to overwrite)")
    body = INIT_TEMPLATE + tomli_w.dumps({"db": ".dex/dex.db"}) + (
        "\n# SQLite durability: NORMAL (fast; survives process crashes) or FULL (also survives power loss).\n"
        + tomli_w.dumps({"synchronous": "NORMAL"}))
    path.write_text(body)
    path.chmod(0o644)  # whatever the umask: dex trusts no dex.toml that others can write (config.distrust)
    print(f"wrote {path}")


@time_app.callback()
def time_show(ctx: typer.Context,
              all_flows: bool = typer.Option(False, "--all", help="Closed flows too (by default only running ones).")
              ) -> None:
    """Show the running flows whose clocks were skipped ahead, and by how much (--all: closed ones too)."""
    if ctx.invoked_subcommand is not None:
        return
    from dexcli.cli.config import format_duration

    store = open_store(read_only=True)
    skipped = [f for f in store.list_flows(None, None, 1000) if f.clock_offset]
    listed = [f for f in skipped if all_flows or f.is_running]
    hidden = len(skipped) - len(listed)
    if not skipped:
        print("every flow runs on real time (no flow's clock was skipped)")
        return
    if not listed:
        print("every running flow runs on real time")
    cells = [(shown(f.flow_id), f.status.value, f"+{format_duration(f.clock_offset)} ahead of real time")
             for f in listed]
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(2)]
    for fid, status, ahead in cells:
        print(f"{fid:<{widths[0]}}  {status:<{widths[1]}}  {ahead}")
    if hidden:
        print(f"({hidden} closed flow{'s' if hidden > 1 else ''} skipped too: dex time --all lists "
              f"{'them' if hidden > 1 else 'it'})")


def _flows_to_move(store: Store, flow_ids: list[str], all_running: bool, verb: str) -> list[str]:
    """The flows a `dex time` command moves: those named (each must exist and be running: a
    closed flow's times are its history, neither skipped nor reset), or with --all every
    running flow."""
    if all_running and flow_ids:
        raise UsageError(f"time {verb}: name the flows (FLOW_ID ...) or pass --all, not both")
    if not all_running and not flow_ids:
        example = "2m FLOW_ID" if verb == "skip" else "FLOW_ID"
        raise UsageError(f"time {verb}: which flows? name them (dex time {verb} {example}) "
                         "or pass --all for every running flow")
    if all_running:
        return store.running_flow_ids()
    for fid in flow_ids:
        flow = flow_or_not_found(store, fid)
        if not flow.is_running:
            raise ConflictError(f"flow {fid} is already {flow.status.value}: its clock no longer runs")
    return list(flow_ids)


@time_app.command("skip")
def time_skip(duration: str = typer.Argument(..., help="How far to move the clocks: 30s, 2m, 1h."),
              flow_ids: list[str] = typer.Argument(None, metavar="[FLOW_ID]...", help="The flows to move."),
              all_running: bool = typer.Option(False, "--all", help="Move every running flow.")) -> None:
    """Move the named flows' clocks forward (or every running flow's, with --all).

    Only those flows see the time pass: what they wait for comes that much sooner. Other flows
    keep real time. A process driving a moved flow follows within half a second."""
    from dexcli.cli.config import format_duration, parse_duration
    from dexcli.cli.driver import build_engine
    from dexcli.engine import TimeSkip

    secs = parse_duration(duration, "time skip")
    store = open_store()
    ids = _flows_to_move(store, flow_ids or [], all_running, "skip")
    # one transaction: two skips at once both count (a process driving a moved flow follows)
    skipped = build_engine(store, time_skip=False).change(TimeSkip(tuple(ids), secs)) if ids else None
    moved, held = (skipped.moved, skipped.held) if skipped else ({}, {})
    if not moved and not held:
        print("no running flow to move")
    for fid, offset in moved.items():
        print(f"{shown(fid)}: clock moved forward {format_duration(secs)}; now +{format_duration(offset)} ahead")
    if held:
        raise ConflictError(held_by_live(held))


def held_by_live(held: dict[str, str]) -> str:
    """Why a skip left these flows alone (flow id -> the live owner of a lease of theirs)."""
    owners = ", ".join(f"{shown(fid)} (process {owner.split(':')[1]}, lease {owner})" for fid, owner in held.items())
    return (f"not moved: a live process runs an attempt of {owners}; a skip would expire its lease and"
            " its healthy attempt would be declared lost — skip once that process ends (or stop it: Ctrl-C)")


@time_app.command("reset")
def time_reset(flow_ids: list[str] = typer.Argument(None, metavar="[FLOW_ID]...", help="The flows to reset."),
               all_running: bool = typer.Option(False, "--all", help="Reset every running flow.")) -> None:
    """Put flows back on real time (what was skipped stays skipped).

    Their stored times move back by their offset: what they wait for stays due when it was, and
    `dex list` and `dex inspect` show real times."""
    from dexcli.cli.config import format_duration

    store = open_store()
    for fid in _flows_to_move(store, flow_ids or [], all_running, "reset"):
        offset = store.reset_flow_clock(fid)
        print(f"{shown(fid)}: " + (f"back on real time (its times moved back {format_duration(offset)})"
                                   if offset else "already on real time"))
