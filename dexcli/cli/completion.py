"""Shell completion: `dex inspect <TAB>` offers the most recent flows of the database the
command line names (`--db`, else $DEX_DB, dex.toml, the default); `dex run <TAB>` the flow
names of the installed plugins; `dex rpc FLOW <TAB>` that flow's RPCs.

Install it with `dex --install-completion` (bash, zsh, fish, PowerShell). A completion runs on
every TAB, so it stays cheap: one SELECT of the most recent RECENT flows, newest first. It
never fails loudly: with no database, or one it cannot read, it offers nothing.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

RECENT = 200  # flows a completion reads, newest first


def recent_flow_ids(db_flag: str | None, incomplete: str, running_only: bool = False) -> list[tuple[str, str]]:
    """(flow id, `type · STATUS`) of the most recent flows whose id starts with `incomplete`.
    An older run kept under `<id>$<run>` is offered only once `$` is typed."""
    try:
        from dexcli.cli.config import resolve_db
        from dexcli.store import ARCHIVE_SEPARATOR, FlowState, Store

        path = resolve_db(db_flag)[0]
        if not path.is_file():
            return []
        store = Store(path, read_only=True)
        try:
            flows = store.list_flows(FlowState.RUNNING if running_only else None, None, RECENT)
        finally:
            store.close()
    except Exception:  # a completion must not print a traceback into the user's prompt
        return []
    archived = ARCHIVE_SEPARATOR in incomplete
    return [(f.flow_id, f"{f.flow_type} · {f.status.value}") for f in flows
            if f.flow_id.startswith(incomplete) and (archived or ARCHIVE_SEPARATOR not in f.flow_id)]


def _db_flag(ctx: Any) -> str | None:
    """`--db` as given on the command line being completed (the root callback has not run)."""
    root = ctx.find_root() if ctx is not None else None
    value = root.params.get("db") if root is not None else None
    return value if isinstance(value, str) else None


def complete_flow_id(ctx: Any, args: Any, incomplete: str | None) -> list[tuple[str, str]]:
    """Any recent flow: for inspect, watch, rpc, wait (typer's `autocompletion=`: it passes the
    click context, the words before, and the word being completed)."""
    return recent_flow_ids(_db_flag(ctx), incomplete or "")


def complete_running_flow_id(ctx: Any, args: Any, incomplete: str | None) -> list[tuple[str, str]]:
    """Recent RUNNING flows: for resume, stop, skip-timer, and a flow plugin's command argument
    named `flow_id` (`dex complete-job`)."""
    return recent_flow_ids(_db_flag(ctx), incomplete or "", running_only=True)


def complete_flow_name(ctx: Any, args: Any, incomplete: str | None) -> list[tuple[str, str]]:
    """The flow names `dex run` knows (the installed plugins'), with their descriptions."""
    try:
        from dexcli.cli.discovery import installed

        with contextlib.redirect_stderr(io.StringIO()):  # a broken plugin's warning is not for the prompt
            found = installed()
    except Exception:
        return []
    return [(name, p.description) for name, p in found.plugins.items() if name.startswith(incomplete or "")]


def complete_rpc_name(ctx: Any, args: Any, incomplete: str | None) -> list[tuple[str, str]]:
    """The RPCs of the flow named before (`dex rpc FLOW <TAB>`), with the first line of each
    one's docstring: the flow's class is loaded from its stored reference, as `dex rpc` does."""
    flow_id = ctx.params.get("flow_id") if ctx is not None else None
    if not isinstance(flow_id, str):
        return []
    try:
        from dexcli.cli.config import resolve_db
        from dexcli.cli.driver import build_engine
        from dexcli.store import Store

        path = resolve_db(_db_flag(ctx))[0]
        if not path.is_file():
            return []
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            store = Store(path, create=False)  # (the flow's module may print as it loads)
            try:
                row = store.get_flow(flow_id)
                if row is None:
                    return []
                rpcs = build_engine(store, time_skip=False).definitions.get(row.flow_type, row.flow_ref).rpcs
            finally:
                store.close()
    except Exception:  # an unknown flow, a flow that cannot load: nothing to offer, no traceback
        return []
    return [(name, ((spec.method.__doc__ or "").strip().splitlines() or [""])[0])
            for name, spec in sorted(rpcs.items()) if name.startswith(incomplete or "")]
