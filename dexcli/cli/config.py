"""Where the database is, and how durations are written on the command line."""

from __future__ import annotations

import math
import os
import pwd
import re
import shlex
import stat
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from dexcli.cli.errors import UsageError

if TYPE_CHECKING:
    from dexcli.engine.attribute_sync import AttributeStores

CONFIG_NAME = "dex.toml"
DEFAULT_DB = Path("~/.dex/dex.db")


def find_config(start: Path | None = None) -> Path | None:
    """The nearest dex.toml this user can trust, in the folder or its parents. One that
    another user could have written is skipped with a warning (see `distrust`)."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        p = d / CONFIG_NAME
        if p.is_file():
            why = distrust(p)
            if why is None:
                return p
            if p not in _warned:
                _warned.add(p)
                theirs = p.stat().st_uid not in (os.geteuid(), 0)
                fix = ("to use the database it names anyway, pass it with --db or DEX_DB" if theirs
                       else f"if you trust it: chmod go-w {shlex.quote(str(p))}")
                print(f"dex: warning: ignoring {p}: {why}; {fix}", file=sys.stderr)
    return None


_warned: set[Path] = set()


def distrust(path: Path) -> str | None:
    """Why a file dex would act on (a dex.toml, a flow's code named only by the database) may
    not be the user's own choice, or None. As git (safe.directory) and ssh do: it must be owned
    by this user or root, and writable by no one else. A dex.toml chooses the database every
    command writes, so one left by another user in a shared folder (/tmp) would otherwise decide
    where this user's flows go."""
    st = path.stat()
    if st.st_uid not in (os.geteuid(), 0):
        return f"it belongs to {_user(st.st_uid)}, not to you or root"
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        return f"other users can write it (mode {mode:04o})"
    return None


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def read_config(path: Path) -> dict[str, object]:
    import tomllib  # only with a dex.toml: most commands find none

    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read dex.toml ({exc})") from exc


def resolve_db(cli_db: str | None) -> tuple[Path, str]:
    """--db, else DEX_DB, else dex.toml's `db` (relative to the file), else ~/.dex/dex.db.

    Returns the path and where it came from. An empty path from any of them is a usage error,
    not the next source: `--db "$UNSET"` must not quietly use another database.
    """
    if cli_db is not None:
        return Path(_non_empty(cli_db, "--db")).expanduser(), "--db"
    env = os.environ.get("DEX_DB")
    if env is not None:
        return Path(_non_empty(env, "DEX_DB")).expanduser(), "DEX_DB"
    cfg = find_config()
    if cfg is not None:
        db = read_config(cfg).get("db")
        if db is not None:
            if not isinstance(db, str):
                raise UsageError(f"{cfg}: db must be a path in quotes, got {db!r}")
            p = Path(_non_empty(db, f"{cfg}: db")).expanduser()
            return (p if p.is_absolute() else cfg.parent / p), str(cfg)
    return DEFAULT_DB.expanduser(), "default"


def _non_empty(path: str, source: str) -> str:
    if not path.strip():
        raise UsageError(f"{source} is empty; give a database path (or leave it unset for the default, "
                         f"{DEFAULT_DB})")
    return path


def busy_timeout_setting() -> float:
    """DEX_BUSY_TIMEOUT, else dex.toml's `busy_timeout`, else 30: the seconds a write waits
    for another process's write lock before dex gives up (exit 2)."""
    from dexcli.store.connection import DEFAULT_BUSY_TIMEOUT

    cfg = find_config()
    raw: object = DEFAULT_BUSY_TIMEOUT
    if cfg is not None:
        raw = read_config(cfg).get("busy_timeout", raw)
    raw = os.environ.get("DEX_BUSY_TIMEOUT", raw)
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        value = -1.0
    if not 0 <= value <= MAX_DURATION:  # NaN and inf too
        raise UsageError(f"busy timeout must be a number of seconds (DEX_BUSY_TIMEOUT or dex.toml busy_timeout), "
                         f"got {raw!r}")
    return value


def synchronous_setting() -> str:
    cfg = find_config()
    value = "NORMAL"
    if cfg is not None:
        v = read_config(cfg).get("synchronous")
        if isinstance(v, str):
            value = v.upper()
    value = os.environ.get("DEX_SYNCHRONOUS", value).upper()
    if value not in ("NORMAL", "FULL"):
        raise UsageError(f"synchronous must be NORMAL or FULL, got {value!r}")
    return value


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
#: The longest duration dex takes on the command line (every flag and argument that is one):
#: 100 years. Longer ones are mistakes, and a clock moved that far leaves what a date can show.
MAX_DURATION = 100 * 365 * 86400.0
DURATION_HELP = "use 3s, 90s, 2m, 15m, 1h, 1d, up to 100 years"


def parse_duration(text: str, what: str = "duration") -> float:
    """`3s`, `90s`, `2m`, `15m`, `1h`, `1m30s`, or plain seconds -> seconds: finite, not
    negative, at most MAX_DURATION. Anything else (nan, inf, -1, '', 1e400) is a UsageError."""
    t = text.strip().lower()
    total: float | None
    try:
        total = float(t)
    except ValueError:
        total = _units(t)
    if total is None or not 0 <= total <= MAX_DURATION:  # NaN fails both comparisons
        past = total is not None and math.isfinite(total)
        raise UsageError(f"{what}: {text!r} is " + ("more than 100 years" if past else "not a duration") +
                         f" ({DURATION_HELP})")
    return total


def _units(t: str) -> float | None:
    """`1h30m` -> 5400.0; None when `t` is not a run of NUMBER UNIT."""
    pos, total = 0, 0.0
    for m in _DURATION.finditer(t):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if t and pos == len(t) else None


def format_duration(seconds: float) -> str:
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} m {sec} s" if sec else f"{m} m"
    h, m = divmod(m, 60)
    return f"{h} h {m} m" if m else f"{h} h"


INIT_TEMPLATE = """\
# dex configuration. dex looks for this file in the current folder and its parents.

# The SQLite database that holds flows, checkpoints and history. Relative paths are
# relative to this file. Overridden by --db and by the DEX_DB environment variable.
"""


def parse_iso(s: str | None) -> float | None:
    """An ISO time of the inspect JSON as epoch seconds (None stays None)."""
    if s is None:
        return None
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def clock_time(s: str | None) -> str:
    """An ISO time of the inspect JSON as the UTC time of day (`-` for none)."""
    t = parse_iso(s)
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, tz=UTC).strftime("%H:%M:%S")


ATTRIBUTE_STORE_HELP = ("[attribute_store.stores.NAME] takes type (sqlite, the default, or postgres), table_name, "
                        "and path (sqlite) or dsn (postgres)")


def attribute_stores_setting() -> AttributeStores | None:
    """dex.toml's [attribute_store]: the stores synced attributes project to (None: none set).

        [attribute_store]
        default = "profiles"              # the store of flows whose FlowConfig names none
        [attribute_store.stores.profiles]
        type = "sqlite"                   # the default; or "postgres"
        path = "profiles.db"              # sqlite: relative to dex.toml; must exist, with its table
        table_name = "user_profiles"
        [attribute_store.stores.reporting]
        type = "postgres"
        dsn = "postgresql://user:password@host/database"
        table_name = "public.flow_attributes"

    With one store and no `default`, that store is the default. Anything else is a UsageError."""
    from dexcli.engine.attribute_sync import AttributeStores
    from dexcli.store.attribute_targets import KINDS, StoreSettings

    cfg = find_config()
    if cfg is None:
        return None
    section = read_config(cfg).get("attribute_store")
    if section is None:
        return None
    where = f"{cfg}: [attribute_store]"
    if not isinstance(section, dict):
        raise UsageError(f"{where} must be a table")
    unknown = set(section) - {"default", "stores"}
    if unknown:
        raise UsageError(f"{where} has unknown key {sorted(unknown)[0]!r} (it takes default and stores)")
    stores = section.get("stores", {})
    if not isinstance(stores, dict) or not stores:
        raise UsageError(f"{where} names no stores; {ATTRIBUTE_STORE_HELP}")
    settings = {}
    for name, entry in stores.items():
        here = f"{cfg}: [attribute_store.stores.{name}]"
        if not isinstance(entry, dict):
            raise UsageError(f"{here} must be a table; {ATTRIBUTE_STORE_HELP}")
        extra = set(entry) - {"type", "path", "dsn", "table_name"}
        if extra:
            raise UsageError(f"{here} has unknown key {sorted(extra)[0]!r}; {ATTRIBUTE_STORE_HELP}")
        kind = entry.get("type", "sqlite")
        if kind == "mysql":
            raise UsageError(f"{here}: dex does not write to MySQL Attribute Stores (sqlite or postgres)")
        if kind not in KINDS:
            raise UsageError(f"{here}: type must be sqlite or postgres, got {kind!r}")
        table = entry.get("table_name")
        if not isinstance(table, str) or not table.strip():
            raise UsageError(f"{here} needs table_name (the table dex writes; dex never creates it)")
        needs, other = ("path", "dsn") if kind == "sqlite" else ("dsn", "path")
        value = entry.get(needs)
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{here}: a {kind} store needs {needs}")
        if other in entry:
            raise UsageError(f"{here}: a {kind} store takes {needs}, not {other}")
        if kind == "sqlite":
            p = Path(value).expanduser()
            value = str(p if p.is_absolute() else cfg.parent / p)
            if Path(value).resolve() == resolve_db(None)[0].resolve():
                raise UsageError(f"{here}: path is the dex database itself; a store is a database of its own")
            settings[name] = StoreSettings(name, kind, table, path=value)
        else:
            settings[name] = StoreSettings(name, kind, table, dsn=value)
    default = section.get("default")
    if default is None and len(settings) == 1:
        default = next(iter(settings))
    if default is not None and default not in settings:
        raise UsageError(f"{where}: default {default!r} is not one of its stores ({', '.join(sorted(settings))})")
    return AttributeStores(settings, default)
