"""The read path that skips typer: `dex [--db P] inspect FLOW_ID [--json]`.

Loading typer (and click under it) is about half of what `dex inspect` costs on a warm machine,
and a user reading one flow pays it for nothing. `dexcli.cli.main.main` asks `run` first:
when the command line is exactly an inspect of one flow (text or `--json`, `--db` anywhere),
it is served here with the same code (`show_inspect`, also what `dex inspect` runs under
typer), the same database resolution and the same one-line errors and exit codes. Anything
else — `--help`, `--timeline`, an option it does not know, a missing or extra argument — goes
to the typer app, which owns usage errors and help.
"""

from __future__ import annotations

import sys

from dexcli.cli.shared import STATE, exit_for, open_store, out_console, refuse_undecodable, store_now


def show_inspect(flow_id: str, json_out: bool) -> None:
    """`dex inspect FLOW_ID [--json]` (the timeline is read_cmds' own)."""
    from dexcli.engine.views import inspect_flow

    store = open_store(read_only=True)
    snap = inspect_flow(store, flow_id, store_now(store, flow_id))
    if json_out:
        import json

        from dexcli.engine.inspect_json import dex_cli_json

        print(json.dumps(dex_cli_json(snap), indent=2))
        return
    from dexcli.cli.render_inspect import inspect_view
    from dexcli.cli.shown import shown_data

    flow = store.get_flow(flow_id)
    out_console().print(inspect_view(shown_data(snap), flow.clock_offset if flow is not None else 0.0))


def parse(args: list[str]) -> tuple[str | None, str, bool] | None:
    """(db flag, flow id, json) when `args` is an inspect this path serves, else None."""
    db: str | None = None
    rest: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--db" and i + 1 < len(args):
            db, i = args[i + 1], i + 2
            continue
        if a.startswith("--db="):
            db = a[len("--db="):]
        else:
            rest.append(a)
        i += 1
    if not rest or rest[0] != "inspect":
        return None
    json_out = "--json" in rest
    words = [a for a in rest[1:] if a != "--json"]
    if len(words) != 1 or words[0].startswith("-") or rest.count("--json") > 1:
        return None
    return db, words[0], json_out


def run(args: list[str]) -> bool:
    """Serve `args` if it is an inspect this path knows (then exit); False: use the typer app."""
    parsed = parse(args)
    if parsed is None:
        return False
    refuse_undecodable(args)
    STATE.db_flag, flow_id, json_out = parsed
    try:
        show_inspect(flow_id, json_out)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("dex: interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as e:
        from dexcli.cli.stopping import EXIT_OUTPUT_CLOSED, is_closed_pipe, silence_stdout

        if not is_closed_pipe(e):
            raise
        silence_stdout()
        sys.exit(EXIT_OUTPUT_CLOSED)
    except Exception as e:
        exit_for(e)
    sys.exit(0)
