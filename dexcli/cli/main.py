"""`dex`: run, watch and inspect Dex flows on this machine.

Each command parses its arguments, makes one call into the engine or the store, and renders.
Errors a user can cause are DexError subclasses: one line on stderr, exit code on the class.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

from dexcli.sdk.errors import DexError, NotFoundError, UsageError
from dexcli.store.errors import StoreError


EXIT_CODES_HELP = ("Exit codes: 0 completed / ok · 1 flow FAILED, CANCELED or TERMINATED · 2 usage · "
                   "3 not found · 4 conflict · 130 interrupted · 137 injected crash.")

def _click_exceptions() -> Any:
    try:  # typer >= 0.2x vendors click as typer._click
        from typer import _click

        return _click.exceptions
    except ImportError:  # pragma: no cover - older typer on the real click
        import click

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


class DexGroup(TyperGroup):
    """Click's own usage errors (unknown option, missing argument, bad value) as one line on
    stderr, `dex: error: ...`, like every other user mistake; exit code 2."""

    def main(self, args: Any = None, prog_name: Any = None, complete_var: Any = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        args = _hoist_global_options(list(sys.argv[1:] if args is None else args))
        exc = _click_exceptions()
        abort = getattr(exc, "Abort", KeyboardInterrupt)  # not every vendored click has Abort
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except (DexError, StoreError) as e:  # every user mistake, from every command: one line, its exit code
            print(f"dex: error: {str(e).replace(chr(10), ' ')}", file=sys.stderr)
            sys.exit(e.exit_code)
        except (KeyboardInterrupt, abort):
            print("dex: interrupted", file=sys.stderr)
            sys.exit(130)
        except exc.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except exc.ClickException as e:
            hint = ""
            ctx = getattr(e, "ctx", None)
            if isinstance(e, exc.UsageError) and ctx is not None:
                hint = f" (see `{ctx.command_path} --help`)"
            msg = e.format_message().replace("\n", " ")
            print(f"dex: error: {msg}{hint}", file=sys.stderr)
            sys.exit(e.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="dex",
    cls=DexGroup,
    help="Run and inspect Dex flows on one machine: durable steps, retries, heartbeats and "
         "checkpoints in SQLite, with a live terminal view.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
time_app = typer.Typer(help="The database clock: show it, or move it forward for every process.",
                       invoke_without_command=True)
app.add_typer(time_app, name="time")


class State:
    db_flag: Optional[str] = None


STATE = State()


def _no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


def out_console() -> Console:
    width = None
    if not sys.stdout.isatty():  # pipes and files: do not wrap at 80 columns
        width = int(os.environ.get("COLUMNS", "0") or 0) or 160
    return Console(no_color=_no_color(), highlight=False, soft_wrap=False, width=width)


def err_console() -> Console:
    return Console(stderr=True, no_color=_no_color(), highlight=False, soft_wrap=True)


def db_path() -> Path:
    from dexcli.cli.config import resolve_db

    return resolve_db(STATE.db_flag)[0]


def open_store(must_exist: bool = False) -> Any:
    from dexcli.store import Store

    path = db_path()
    if must_exist and not path.exists():
        raise NotFoundError(f"no dex database at {path} (run a flow first, or pass --db)")
    return Store(path, synchronous=_sync())


def _sync() -> str:
    from dexcli.cli.config import synchronous_setting

    return synchronous_setting()


def _version(value: bool) -> None:
    if value:
        from dexcli import __version__

        print(f"dex {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    db: Optional[str] = typer.Option(None, "--db", help="Database path (else $DEX_DB, else dex.toml, else ~/.dex/dex.db).",
                                     envvar=None),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    STATE.db_flag = db


def _view_mode(json_out: bool) -> str:
    if json_out:
        return "json"
    return "live" if sys.stdout.isatty() and os.environ.get("TERM") != "dumb" else "lines"


def _parse_input(text: Optional[str]) -> Any:
    if text is None:
        return None
    if text.startswith("@"):
        p = Path(text[1:]).expanduser()
        try:
            text = p.read_text()
        except OSError as exc:
            raise UsageError(f"--input: cannot read {p}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"--input is not valid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})") from None


# ---------------------------------------------------------------------------------- run
@app.command()
def run(
    flow: Optional[str] = typer.Argument(None, help="A flow name from `dex flows` (e.g. polling)."),
    file: Optional[str] = typer.Option(None, "--file", help="Your own flow: path/to/module.py:FlowClass."),
    flow_id: Optional[str] = typer.Option(None, "--flow-id", help="Flow ID (default: generated)."),
    input: Optional[str] = typer.Option(None, "--input", help="Start input as JSON, or @file.json."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event, then the inspect object."),
    time_skip: bool = typer.Option(False, "--time-skip", help="Skip idle waits: jump the database clock to the next deadline."),
    crash_after: Optional[str] = typer.Option(None, "--crash-after", help="Kill this process (os._exit) after a duration, e.g. 3s."),
    crash_at: Optional[str] = typer.Option(
        None, "--crash-at",
        help="Kill this process at a point: attempt-start, heartbeat[:N], stream-write[:N], before-commit, "
             "after-commit; narrow to a step with @Step (heartbeat:2@AwaitJob)."),
    stall: Optional[str] = typer.Option(None, "--stall", help="STEP[:ATTEMPT]: that attempt hangs without heartbeats."),
    fail: Optional[str] = typer.Option(None, "--fail", help="STEP[:N]: the first N attempts of STEP raise a transient error."),
    job_duration: Optional[str] = typer.Option(None, "--job-duration", help="Polling flow: how long the simulated job runs (default 6s)."),
    job_fails: bool = typer.Option(False, "--job-fails", help="Polling flow: the simulated job ends FAILED."),
) -> None:
    """Start a flow and drive it to its end here, showing it live."""
    from dexcli.cli.config import parse_duration
    from dexcli.cli.driver import drive_flow
    from dexcli.client import Client
    from dexcli.engine.faults import Faults
    from dexcli.loader import load_flow

    flow_obj, ref = load_flow(flow, file)
    start_input = _parse_input(input)
    faults = Faults.from_options(crash_at=crash_at, stall=stall, fail=fail)
    crash_after_s = parse_duration(crash_after, "--crash-after") if crash_after else None
    duration_s = parse_duration(job_duration, "--job-duration") if job_duration else None
    store = open_store()
    from dexcli.cli.driver import make_clock
    from dexcli.engine.core import Engine
    from dexcli.sdk.registry import Registry

    clock = make_clock(store, time_skip)
    engine = Engine(store, clock, Registry())
    definition = engine.registry.add(flow_obj)
    for w in definition.warnings:
        print(f"dex: warning: {w}", file=sys.stderr)
    client = Client(engine=engine)
    if (duration_s is not None or job_fails) and definition.flow_type != "PollingFlow":
        raise UsageError("--job-duration and --job-fails apply to the polling flow only")
    fid = flow_id or _new_flow_id(definition.flow_type)
    if store.get_flow(fid) is not None:
        from dexcli.sdk.errors import FlowAlreadyStartedError

        raise FlowAlreadyStartedError(f"flow {fid} already exists; choose another --flow-id or `dex inspect {fid}`")
    if definition.flow_type == "PollingFlow":
        from dexcli.engine.host import StoreHost
        from flows.job_service import FakeJobService

        FakeJobService(StoreHost(store, clock)).configure_job(fid, duration_seconds=duration_s, fails=job_fails)
    client.start_flow(flow_obj, fid, start_input, flow_ref=ref)
    store.close()
    code = drive_flow(out_console(), db_path(), fid, mode=_view_mode(json_out), time_skip=time_skip,
                      faults=faults, crash_after=crash_after_s, err=err_console())
    raise typer.Exit(code)


def _new_flow_id(flow_type: str) -> str:
    import uuid

    base = flow_type.lower().removesuffix("flow") or "flow"
    return f"{base}-{uuid.uuid4().hex[:6]}"


@app.command()
def resume(
    flow_id: str = typer.Argument(..., help="The flow to drive to its end."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event, then the inspect object."),
    time_skip: bool = typer.Option(False, "--time-skip", help="Skip idle waits (including a lost attempt's heartbeat timeout)."),
) -> None:
    """Drive one flow to its end here (after a crash or Ctrl-C), with the live view."""
    from dexcli.cli.driver import drive_flow, exit_code_for
    from dexcli.cli.render import final_card

    store = open_store(must_exist=True)
    row = store.get_flow(flow_id)
    if row is None:
        raise NotFoundError(f"no flow with id {flow_id!r} in {store.path}")
    if not row.is_running:
        from dexcli.engine.views import inspect_flow

        snap = inspect_flow(store, flow_id, store_now(store))
        if json_out:
            print(json.dumps(snap))
        else:
            out_console().print(final_card(snap))
            print(f"(flow {flow_id} had already ended; nothing to resume)")
        raise typer.Exit(exit_code_for(row.status.value))
    store.close()
    code = drive_flow(out_console(), db_path(), flow_id, mode=_view_mode(json_out), time_skip=time_skip,
                      faults=_no_faults(), err=err_console())
    raise typer.Exit(code)


def _no_faults() -> Any:
    from dexcli.engine.faults import Faults

    return Faults()


def store_now(store: Any) -> float:
    import time

    return time.time() + store.clock_offset()


@app.command()
def worker(
    until_idle: bool = typer.Option(False, "--until-idle", help="Stop when nothing is left to run."),
    time_skip: bool = typer.Option(False, "--time-skip", help="Skip idle waits (moves the database clock)."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines, one per event."),
) -> None:
    """Drive every runnable flow in the database until interrupted (or idle)."""
    from dexcli.cli.driver import run_worker

    open_store().close()
    code = run_worker(out_console(), db_path(), until_idle=until_idle, time_skip=time_skip,
                      mode="json" if json_out else "lines", faults=_no_faults())
    raise typer.Exit(code)


@app.command()
def watch(
    flow_id: str = typer.Argument(..., help="A flow another process is running."),
    json_out: bool = typer.Option(False, "--json", help="Print the inspect object when the flow ends."),
) -> None:
    """Follow a flow that another process drives (read-only); exit when it ends."""
    from dexcli.cli.driver import watch_flow

    store = open_store(must_exist=True)
    if store.get_flow(flow_id) is None:
        raise NotFoundError(f"no flow with id {flow_id!r} in {store.path}")
    store.close()
    raise typer.Exit(watch_flow(out_console(), db_path(), flow_id, mode=_view_mode(json_out)))


# ---------------------------------------------------------------------------------- read
@app.command()
def inspect(
    flow_id: str = typer.Argument(..., help="The flow to show."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object: summary, steps, streams, history."),
) -> None:
    """Show everything about one flow: steps and every attempt, checkpoints, deadlines, Streams, history."""
    from dexcli.cli.render import inspect_view
    from dexcli.engine.views import inspect_flow

    store = open_store(must_exist=True)
    snap = inspect_flow(store, flow_id, store_now(store))
    if json_out:
        print(json.dumps(snap, indent=2))
        return
    out_console().print(inspect_view(snap, store.clock_offset()))


STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELED", "TERMINATED")


@app.command("list")
def list_flows(
    status: Optional[str] = typer.Option(None, "--status", help="RUNNING, COMPLETED, FAILED, CANCELED or TERMINATED."),
    flow_type: Optional[str] = typer.Option(None, "--type", help="Only this flow type (e.g. PollingFlow)."),
    limit: int = typer.Option(20, "--limit", min=1, help="How many, newest first."),
    json_out: bool = typer.Option(False, "--json", help="A JSON list of summaries."),
) -> None:
    """List flows, newest first."""
    from dexcli.engine.views import flow_summary

    if status is not None and status.upper() not in STATUSES:
        raise UsageError(f"--status must be one of {', '.join(STATUSES)}")
    store = open_store(must_exist=True)
    from dexcli.store import FlowState

    rows = store.list_flows(FlowState(status.upper()) if status else None, flow_type, limit)
    if json_out:
        print(json.dumps([flow_summary(r) for r in rows], indent=2))
        return
    from datetime import datetime, timezone

    from dexcli.cli.config import format_duration

    if not rows:
        print("no flows" + (" match" if status or flow_type else f" in {store.path}"))
        return
    now = store_now(store)
    headers = ("flow id", "type", "status", "started (UTC)", "duration", "result / error")
    cells = []
    for r in rows:
        info = r.error_message or ", ".join(json.dumps(c["output"]) for c in json.loads(r.completions))
        cells.append((r.flow_id, r.flow_type, r.status.value,
                      datetime.fromtimestamp(r.start_time, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
                      format_duration((r.close_time or now) - r.start_time), info))
    if not sys.stdout.isatty():  # scripts and pipes: aligned plain text, no Rich layout to pay for
        widths = [max(len(str(row[i])) for row in (headers, *cells)) for i in range(len(headers) - 1)]
        for row in (headers, *cells):
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)) + "  " + str(row[-1]))
        return
    from rich.table import Table

    from dexcli.cli.render import STATUS_STYLE

    table = Table(box=None, pad_edge=False)
    for col in headers:
        table.add_column(col, overflow="fold")
    for row in cells:
        table.add_row(row[0], row[1], f"[{STATUS_STYLE.get(row[2], '')}]{row[2]}[/]", *row[3:])
    out_console().print(table)


@app.command()
def flows() -> None:
    """List the flows `dex run` knows by name."""
    from dexcli.loader import KNOWN_FLOWS

    for k in KNOWN_FLOWS.values():
        module, _, cls = k.target.partition(":")
        print(f"{k.name:<12} {cls:<16} {module:<20} {k.description}")


@app.command("complete-job")
def complete_job(flow_id: Optional[str] = typer.Argument(None, help="The polling flow (default: the one running).")) -> None:
    """Finish the simulated job of a polling flow early."""
    from dexcli.cli.driver import make_clock
    from dexcli.engine.host import StoreHost
    from dexcli.store import FlowState
    from flows.job_service import FakeJobService

    store = open_store(must_exist=True)
    if flow_id is None:
        running = [r.flow_id for r in store.list_flows(FlowState.RUNNING, "PollingFlow", 1000)]
        if not running:
            raise NotFoundError("no polling flow is running; name one: dex complete-job FLOW_ID")
        if len(running) > 1:
            raise UsageError(f"{len(running)} polling flows are running ({', '.join(running[:5])}); name one")
        flow_id = running[0]
    jobs = FakeJobService(StoreHost(store, make_clock(store, False)))
    try:
        jobs.complete_job(flow_id)
    except LookupError:
        raise NotFoundError(f"no simulated job for flow {flow_id!r} (is it a polling flow that has started?)") from None
    status = jobs.describe_job(flow_id)
    print(f"job {flow_id} completed: {status.state.value if status else 'SUCCEEDED'}"
          f" — the flow sees it at its next poll")


@app.command()
def stop(
    flow_id: str = typer.Argument(...),
    type_: str = typer.Option("cancel", "--type", help="cancel, terminate or fail."),
    reason: Optional[str] = typer.Option(None, "--reason"),
) -> None:
    """Stop a running flow (CANCELED, TERMINATED, or FAILED with CLIENT_API_FAILED)."""
    from dexcli.cli.driver import make_clock
    from dexcli.engine.core import Engine
    from dexcli.sdk.errors import FlowNotActiveOrNotFoundError

    kinds = {"cancel": "CANCEL", "terminate": "TERMINATE", "fail": "FAIL"}
    if type_.lower() not in kinds:
        raise UsageError("--type must be cancel, terminate or fail")
    store = open_store(must_exist=True)
    if store.get_flow(flow_id) is None:
        raise NotFoundError(f"no flow with id {flow_id!r}")
    try:
        Engine(store, make_clock(store, False)).stop_flow(flow_id, kinds[type_.lower()], reason)
    except FlowNotActiveOrNotFoundError as exc:
        raise UsageError(str(exc)) from None
    print(f"flow {flow_id} stopped ({kinds[type_.lower()].lower()})")


@app.command()
def doctor(flow_id: Optional[str] = typer.Argument(None, help="Check one flow (default: all).")) -> None:
    """Check the database's invariants and report each breach (exit 1 if any)."""
    from dexcli.engine.doctor import check

    store = open_store(must_exist=True)
    if flow_id is not None and store.get_flow(flow_id) is None:
        raise NotFoundError(f"no flow with id {flow_id!r}")
    problems, checked = check(store, flow_id)
    for p in problems:
        print(p)
    print(f"{checked} flow(s) checked, {len(problems)} problem(s)")
    raise typer.Exit(1 if problems else 0)


@app.command()
def init(force: bool = typer.Option(False, "--force", help="Overwrite an existing dex.toml.")) -> None:
    """Write a commented dex.toml in this folder (its database: ./.dex/dex.db)."""
    import tomli_w

    from dexcli.cli.config import CONFIG_NAME, INIT_TEMPLATE

    path = Path.cwd() / CONFIG_NAME
    if path.exists() and not force:
        from dexcli.sdk.errors import ConflictError

        raise ConflictError(f"{path} exists (use --force to overwrite)")
    body = INIT_TEMPLATE + tomli_w.dumps({"db": ".dex/dex.db"}) + (
        "\n# SQLite durability: NORMAL (fast; survives process crashes) or FULL (also survives power loss).\n"
        + tomli_w.dumps({"synchronous": "NORMAL"}))
    path.write_text(body)
    print(f"wrote {path}")


@time_app.callback()
def time_show(ctx: typer.Context) -> None:
    """Show the database clock: its offset from real time."""
    if ctx.invoked_subcommand is not None:
        return
    from datetime import datetime, timezone

    from dexcli.cli.config import format_duration

    store = open_store()
    off = store.clock_offset()
    now = datetime.fromtimestamp(store_now(store), tz=timezone.utc).isoformat(timespec="seconds")
    print(f"database time {now} · offset +{format_duration(off)}" + ("" if off else " (real time)"))


@time_app.command("skip")
def time_skip(duration: str = typer.Argument(..., help="How far to move the clock: 30s, 2m, 1h.")) -> None:
    """Move the database clock forward for every process using this database."""
    from dexcli.cli.config import format_duration, parse_duration

    secs = parse_duration(duration, "time skip")
    store = open_store()
    store.set_clock_offset(store.clock_offset() + secs)
    print(f"clock moved forward {format_duration(secs)}; offset now +{format_duration(store.clock_offset())}")


def _register_optional() -> None:
    try:
        from dexcli.cli.graph_cmds import register
    except ImportError:
        return
    register(app)


_register_optional()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
