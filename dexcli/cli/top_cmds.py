"""`dex top`: every flow of the database, live — the counts per status and what the running
flows do — until q or Ctrl-C; `--once` prints one screen, `--json` the overview, for scripts.

Read-only: it opens the database, reads (engine.overview) and renders (render_top); it builds
no engine, runs no flow code and writes nothing. Not on a terminal, it prints one screen.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TYPE_CHECKING, Any

import typer

from dexcli.cli.app import open_store, out_console
from dexcli.cli.shared import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from rich.console import Console

    from dexcli.store import Store

QUIT_KEYS = (b"q", b"Q")


def top(
    once: bool = typer.Option(False, "--once", help="Print one screen and exit (what a script or a pipe gets)."),
    json_out: bool = typer.Option(False, "--json", help="Print the overview as JSON and exit."),
    interval: float = typer.Option(1.0, "--interval", min=0.1, help="Seconds between refreshes."),
    limit: int = typer.Option(50, "--limit", min=1, max=MAX_LIST_LIMIT,
                              help="How many running flows to read, newest first."),
) -> None:
    """Every flow of the database, live: counts, the running flows' steps, the overdue and orphaned ones.

    Each open step shows its attempt, heartbeat age and what it waits for. q (or Ctrl-C) quits.
    Read-only: it runs no flow code and writes nothing."""
    from dexcli.engine.overview import overview

    store = open_store(must_exist=True)
    try:
        if json_out:
            print(json.dumps(overview(store, time.time(), limit), indent=2))
            return
        console = out_console()
        live = not once and sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"
        if not live:
            _print(console, _screen(store, limit, console, quit_hint=False))
            return
        _watch(console, store, limit, interval)
    finally:
        store.close()


def _screen(store: Store, limit: int, console: Console, quit_hint: bool) -> list[Any]:
    from dexcli.cli.render_top import screen
    from dexcli.engine.overview import overview

    width, height = console.size
    if not console.is_terminal:
        height = 10_000  # a pipe or file gets every flow read
    return screen(overview(store, time.time(), limit), str(store.path), width, height, quit_hint)


def _print(console: Console, lines: list[Any]) -> None:
    for line in lines:
        console.print(line)


def _watch(console: Console, store: Store, limit: int, interval: float) -> None:
    """Redraw on the alternate screen every `interval` until q (or Ctrl-C); keys are read one
    at a time (cbreak), so q needs no Enter; the terminal is restored however it ends."""
    import select
    import termios
    import tty

    from rich.console import Group
    from rich.live import Live

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        with Live(console=console, screen=True, auto_refresh=False, transient=True) as live:
            while True:
                live.update(Group(*_screen(store, limit, console, quit_hint=True)), refresh=True)
                ready, _, _ = select.select([fd], [], [], interval)
                if ready and os.read(fd, 1) in QUIT_KEYS:
                    return
    except KeyboardInterrupt:
        return  # Ctrl-C quits, as q does
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
