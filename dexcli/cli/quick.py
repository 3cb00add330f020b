"""The read path that skips typer: `dex [--db P] inspect FLOW_ID [--json]` and `dex [--db P]
list [its options]`.

Loading typer (and click under it) is about half of what `dex inspect` costs on a warm machine,
and a user reading one flow pays it for nothing. `dexcli.cli.main.main` asks `run` first:
when the command line is exactly an inspect of one flow (text or `--json`, `--db` anywhere),
or a `dex list` whose every option is one it knows with a value typer would take as it is
(`--opt VALUE` or `--opt=VALUE`, each once, numbers in their range), it is served here with the
same code (`show_inspect`, `list_view.show_list`, also what the typer commands run), the same
database resolution and the same one-line errors and exit codes. Anything else — `--help`,
`--timeline`, an option it does not know, a repeated option, a value typer would refuse, a
missing or extra argument — goes to the typer app, which owns usage errors and help.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from dexcli.cli.shared import (
    MAX_LIST_LIMIT,
    STATE,
    exit_for,
    open_store,
    out_console,
    plain_width,
    refuse_undecodable,
    store_now,
)


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
    from dexcli.cli.render_inspect import inspect_parts
    from dexcli.cli.shown import shown_data

    flow = store.get_flow(flow_id)
    parts = inspect_parts(shown_data(snap), flow.clock_offset if flow is not None else 0.0)
    width = plain_width()
    if width is not None:  # no styles to print: the same lines without Rich's console (if it lays them out)
        from dexcli.cli.plain_text import plain_lines

        lines = plain_lines(parts, width)
        if lines is not None:
            sys.stdout.write("".join(line + "\n" for line in lines))
            return
    from rich.console import Group

    out_console().print(Group(*parts))


def _split_db(args: list[str]) -> tuple[str | None, list[str]]:
    """`--db PATH` / `--db=PATH` anywhere (as dexcli.cli.app hoists it) and the rest."""
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
    return db, rest


def parse(args: list[str]) -> tuple[str | None, str, bool] | None:
    """(db flag, flow id, json) when `args` is an inspect this path serves, else None."""
    db, rest = _split_db(args)
    if not rest or rest[0] != "inspect":
        return None
    json_out = "--json" in rest
    words = [a for a in rest[1:] if a != "--json"]
    if len(words) != 1 or words[0].startswith("-") or rest.count("--json") > 1:
        return None
    return db, words[0], json_out


# `dex list`'s options (dexcli.cli.read_cmds.list_flows declares them for typer): the parameter
# each sets, and for a number its range
LIST_DEFAULTS: dict[str, Any] = {"status": None, "flow_type": None, "limit": 20, "json_out": False, "query": None,
                                 "page_size": 50, "page_token": "", "all_pages": False, "continued": False}
_LIST_VALUES = {"--status": "status", "--type": "flow_type", "--limit": "limit", "--query": "query", "-q": "query",
                "--page-size": "page_size", "--page-token": "page_token"}
_LIST_FLAGS = {"--json": "json_out", "--all": "all_pages", "--include-continued-as-new": "continued"}
_LIST_RANGES = {"limit": (1, MAX_LIST_LIMIT), "page_size": (1, 1000)}


def parse_list(args: list[str]) -> tuple[str | None, dict[str, Any]] | None:
    """(db flag, show_list's keyword arguments) when `args` is a `dex list` this path serves."""
    db, rest = _split_db(args)
    if not rest or rest[0] != "list":
        return None
    given: dict[str, Any] = {}
    i = 1
    while i < len(rest):
        a = rest[i]
        name, eq, value = a.partition("=")
        val: str | int | bool
        if a in _LIST_FLAGS:
            key, val, i = _LIST_FLAGS[a], True, i + 1
        elif eq and name.startswith("--") and name in _LIST_VALUES:
            key, val, i = _LIST_VALUES[name], value, i + 1
        elif a in _LIST_VALUES and i + 1 < len(rest) and not rest[i + 1].startswith("-"):
            key, val, i = _LIST_VALUES[a], rest[i + 1], i + 2
        else:
            return None  # help, an unknown option, an argument, a value that looks like an option
        if key in given:
            return None
        if key in _LIST_RANGES:
            low, high = _LIST_RANGES[key]
            try:
                val = int(val)  # as click's INT reads it
            except ValueError:
                return None
            if not low <= val <= high:
                return None
        given[key] = val
    return db, {**LIST_DEFAULTS, **given}


def _served(args: list[str]) -> tuple[str | None, Callable[[], None]] | None:
    inspect = parse(args)
    if inspect is not None:
        db, flow_id, json_out = inspect
        return db, lambda: show_inspect(flow_id, json_out)
    listing = parse_list(args)
    if listing is not None:
        from dexcli.cli.list_view import show_list

        db, kwargs = listing
        return db, lambda: show_list(**kwargs)
    return None


def run(args: list[str]) -> bool:
    """Serve `args` if it is a command this path knows (then exit); False: use the typer app."""
    served = _served(args)
    if served is None:
        return False
    refuse_undecodable(args)
    STATE.db_flag, command = served
    try:
        command()
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("dex: interrupted", file=sys.stderr)
        sys.exit(130)
    except OSError as e:
        from dexcli.cli.stopping import EXIT_OUTPUT_CLOSED, is_closed_pipe, silence_stdout

        if not is_closed_pipe(e):
            exit_for(e)  # as the typer app ends any other error
        silence_stdout()
        sys.exit(EXIT_OUTPUT_CLOSED)
    except Exception as e:
        exit_for(e)
    sys.exit(0)
