"""The commands about the setup rather than a flow: init (dex.toml) and time (the database clock)."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import typer

from dexcli.cli.app import open_store, store_now, time_app
from dexcli.cli.errors import ConflictError


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
    print(f"wrote {path}")


@time_app.callback()
def time_show(ctx: typer.Context) -> None:
    """Show the database clock: its offset from real time."""
    if ctx.invoked_subcommand is not None:
        return
    from datetime import datetime

    from dexcli.cli.config import format_duration

    store = open_store()
    off = store.clock_offset()
    now = datetime.fromtimestamp(store_now(store), tz=UTC).isoformat(timespec="seconds")
    print(f"database time {now} · offset +{format_duration(off)}" + ("" if off else " (real time)"))


@time_app.command("skip")
def time_skip(duration: str = typer.Argument(..., help="How far to move the clock: 30s, 2m, 1h.")) -> None:
    """Move the database clock forward for every process using this database."""
    from dexcli.cli.config import format_duration, parse_duration

    secs = parse_duration(duration, "time skip")
    store = open_store()
    offset = store.skip_clock(secs)  # one transaction: two skips at once both count
    print(f"clock moved forward {format_duration(secs)}; offset now +{format_duration(offset)}")
