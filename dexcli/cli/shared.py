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

from dexcli.cli.errors import EXIT_INTERNAL, CliError, NotFoundError
from dexcli.sdk.errors import DexError

if TYPE_CHECKING:
    from rich.console import Console

    from dexcli.store import FlowRecord, Store


class State:
    db_flag: str | None = None


STATE = State()


MAX_LIST_LIMIT = 1_000_000  # what `--limit` of list and top takes (SQLite's LIMIT overflows past int64)

def user_error_types() -> tuple[type[Exception], ...]:
    """The errors printed as one line: the CLI's, the SDK's and the store's. The store's module
    is looked up only if something imported it: a command that never opened a database cannot
    raise its error, and `dex --help` does not pay for importing the store."""
    store_errors = sys.modules.get("dexcli.store.errors")
    return (CliError, DexError) + ((store_errors.StoreError,) if store_errors is not None else ())


def print_error(message: str, code: int) -> NoReturn:
    from dexcli.cli.shown import shown

    print(f"dex: error: {shown(message.replace(chr(10), ' '))}", file=sys.stderr)
    sys.exit(code)


def exit_for(exc: Exception) -> NoReturn:
    """The one way a command that raised ends: a user's error (CLI, SDK, store) as its one line
    and its class's exit code; anything else is a bug in dex, one line and EXIT_INTERNAL — never
    1, which says the flow failed. DEX_DEBUG=1 prints the traceback first."""
    if isinstance(exc, user_error_types()):
        print_error(str(exc), getattr(exc, "exit_code", EXIT_INTERNAL))
    if os.environ.get("DEX_DEBUG", "") not in ("", "0"):
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    print_error(f"internal error: {what} (a bug in dex: please report it; DEX_DEBUG=1 shows the traceback)",
                EXIT_INTERNAL)


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


def _pipe_width() -> int:
    """The width stdout's console draws at when stdout is not a terminal: $COLUMNS, else 160."""
    return int(os.environ.get("COLUMNS", "0") or 0) or 160


def plain_width() -> int | None:
    """The width to print at when stdout's console would print no styles (stdout is not a
    terminal and nothing tells Rich it is one: TTY_COMPATIBLE, FORCE_COLOR), else None."""
    if sys.stdout.isatty() or "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return None
    if (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "") != "utf8":
        return None
    return _pipe_width()


def out_console() -> Console:
    width = None
    if not sys.stdout.isatty():  # pipes and files: do not wrap at 80 columns
        width = _pipe_width()
    # markup off: a `[bold]` in stored text prints as written (dex styles with Text, never markup)
    console: Console = _out_console_class()(no_color=_no_color(), highlight=False, soft_wrap=False, width=width,
                                            markup=False)
    return console


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, no_color=_no_color(), highlight=False, soft_wrap=True, markup=False)


def db_path() -> Path:
    from dexcli.cli.config import resolve_db

    return resolve_db(STATE.db_flag)[0]


def open_store(must_exist: bool = False, read_only: bool = False, warn: bool = True) -> Store:
    """The command's database. `must_exist`: never create one (DatabaseMissingError, exit 3);
    `read_only`, for commands that only read: also never write it, so they work on a database
    this process cannot write, and an empty file is not made a database. An existing database
    others can read is reported once, on stderr (unless not `warn`)."""
    from dexcli.cli.config import busy_timeout_setting, resolve_db, synchronous_setting
    from dexcli.store import Store

    path, source = resolve_db(STATE.db_flag)
    creates = not (must_exist or read_only)
    # a mistyped --db (or DEX_DB, dex.toml) would otherwise go unnoticed; ~/.dex is dex's own
    chosen = creates and source != "default"
    missing = next((d for d in reversed(path.parents) if not d.exists()), None) if chosen else None
    store = Store(path, synchronous=synchronous_setting(), busy_timeout=busy_timeout_setting(),
                  create=creates, read_only=read_only)
    if missing is not None:  # said once: it exists now
        print(f"dex: created the folder {missing} for the new database {path}", file=sys.stderr)
    warn_if_exposed(store.path, warn)
    return store


_warned: set[str] = set()


def warn_if_exposed(path: str, warn: bool = True) -> str | None:
    """What of the database others can read (see dexcli.store.files.exposed), with how to fix it;
    printed on stderr once per process unless `warn` is false."""
    import shlex

    from dexcli.store.files import exposed

    found = exposed(path)
    if found is None:
        return None
    message = (f"the database {path} can be read by other users ({found}); make it private: "
               f"chmod go= {shlex.quote(path)}*")
    if warn and path not in _warned:
        _warned.add(path)
        print(f"dex: warning: {message}", file=sys.stderr)
    return message


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
