"""What every command shares and what needs neither typer nor Rich to load: the database the
command uses, the consoles (Rich loads when one is made), and how a user's error is printed.

`dexcli.cli.app` re-exports these for the commands; `dexcli.cli.quick` (the read path that
skips typer) uses them directly, so both paths open the same database and print the same
errors.
"""

from __future__ import annotations

import errno
import os
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from dexcli.cli.errors import CliError, NotFoundError
from dexcli.sdk.errors import DexError

if TYPE_CHECKING:
    from rich.console import Console

    from dexcli.store import FlowRecord, Store


class State:
    db_flag: str | None = None


STATE = State()


def user_error_types() -> tuple[type[Exception], ...]:
    """The errors printed as one line: the CLI's, the SDK's and the store's. The store's module
    is looked up only if something imported it: a command that never opened a database cannot
    raise its error, and `dex --help` does not pay for importing the store."""
    store_errors = sys.modules.get("dexcli.store.errors")
    return (CliError, DexError) + ((store_errors.StoreError,) if store_errors is not None else ())


def print_error(message: str, code: int) -> NoReturn:
    print(f"dex: error: {message.replace(chr(10), ' ')}", file=sys.stderr)
    sys.exit(code)


def refuse_undecodable(args: list[str]) -> None:
    """An argument that is not UTF-8 reaches Python with lone surrogates in it (PEP 383), which
    neither SQLite nor a JSON value can hold: one line (exit 2) before any command sees it."""
    from dexcli.cli.errors import UsageError

    for a in args:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            print_error(f"argument {os.fsencode(a)!r} is not UTF-8 text", UsageError.exit_code)


def _no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


@cache
def _out_console_class() -> Any:
    from rich.console import Console

    class _OutConsole(Console):
        """stdout's console. A closed stdout is reported to whoever printed, as BrokenPipeError.
        Rich's default points stdout at /dev/null and raises SystemExit in the printing thread: in
        the live view's thread that ended the thread silently and hid the closed pipe from the
        rest of dex (the drive went on, and stdout could no longer be seen to be closed)."""

        def on_broken_pipe(self) -> None:
            self.quiet = True  # nothing more is written
            raise BrokenPipeError(errno.EPIPE, "stdout's reader went away")

    return _OutConsole


def out_console() -> Console:
    width = None
    if not sys.stdout.isatty():  # pipes and files: do not wrap at 80 columns
        width = int(os.environ.get("COLUMNS", "0") or 0) or 160
    console: Console = _out_console_class()(no_color=_no_color(), highlight=False, soft_wrap=False, width=width)
    return console


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, no_color=_no_color(), highlight=False, soft_wrap=True)


def db_path() -> Path:
    from dexcli.cli.config import resolve_db

    return resolve_db(STATE.db_flag)[0]


def open_store(must_exist: bool = False) -> Store:
    from dexcli.cli.config import busy_timeout_setting, synchronous_setting
    from dexcli.store import Store

    path = db_path()
    if must_exist and not path.exists():
        raise NotFoundError(f"no dex database at {path} (run a flow first, or pass --db)")
    return Store(path, synchronous=synchronous_setting(), busy_timeout=busy_timeout_setting())


def flow_or_not_found(store: Store, flow_id: str) -> FlowRecord:
    """The flow's row, or the one not-found error every command gives (exit 3)."""
    flow = store.get_flow(flow_id)
    if flow is None:
        raise NotFoundError(f"no flow with id {flow_id!r} in {store.path}")
    return flow


def store_now(store: Store, flow_id: str | None = None) -> float:
    """Now on a flow's clock (real time plus its offset); real time without a flow."""
    import time

    flow = store.get_flow(flow_id) if flow_id is not None else None
    return time.time() + (flow.clock_offset if flow is not None else 0.0)


def view_mode(json_out: bool) -> str:
    if json_out:
        return "json"
    return "live" if sys.stdout.isatty() and os.environ.get("TERM") != "dumb" else "lines"
