"""The database's files on disk: created private, and how a read-only open reaches them.

A database holds its flows' inputs and outputs, so dex creates it for its owner alone whatever
the umask: each folder it creates 0700, the file 0600 (SQLite gives the -wal and -shm files the
database file's mode, so they follow). An existing database that others can read is reported
(`exposed`), not changed. The file is opened here only to create it, before any connection of
this process has it: closing a descriptor of an open database would drop the process's locks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import quote

from dexcli.store.errors import StoreError

PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700


def sides(path: str) -> tuple[Path, Path]:
    """The -wal and -shm files SQLite keeps beside a database in WAL mode."""
    return Path(f"{path}-wal"), Path(f"{path}-shm")


def create_private(path: str) -> None:
    """Create the folders up to `path` (0700 each) and `path` itself as an empty file (0600),
    where they do not exist yet. SQLite takes an empty file for a new database."""
    p = Path(path)
    missing = [d for d in (p.parent, *p.parent.parents) if not d.exists()]
    for d in reversed(missing):
        try:
            d.mkdir(mode=PRIVATE_FOLDER)
        except FileExistsError:
            continue  # another process made it: its mode is that process's business
        except OSError as exc:
            raise StoreError(f"cannot create the database folder {d}: {exc.strerror}") from exc
        os.chmod(d, PRIVATE_FOLDER)  # mkdir's mode is masked by the umask
    if not os.access(p.parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create the database {path}: the folder {p.parent} is not writable")
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        return  # another process is creating it
    except OSError as exc:
        raise StoreError(f"cannot create the database {path}: {exc.strerror}") from exc
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def exposed(path: str) -> str | None:
    """The database's files (and modes) that users other than its owner can read or write,
    e.g. "dex.db 0644, dex.db-wal 0644", or None when they are private."""
    found = []
    for f in (Path(path), *sides(path)):
        try:
            mode = stat.S_IMODE(f.stat().st_mode)
        except OSError:
            continue
        if mode & 0o066:
            found.append(f"{f.name} {mode:04o}")
    return ", ".join(found) or None


def read_only_uri(path: str) -> str:
    """The URI that opens `path` read-only. In a folder this process cannot write, SQLite cannot
    create the -wal and -shm files a WAL database is read through: then, if they are not both
    there, the file is opened `immutable` (read as it is, no locks), which is only right when
    no -wal holds changes yet to be copied into it (a writer's -wal and -shm exist together)."""
    uri = f"file:{quote(str(Path(path).absolute()))}?mode=ro"
    wal, shm = sides(path)
    if os.access(Path(path).parent, os.W_OK | os.X_OK) or (wal.exists() and shm.exists()):
        return uri
    if wal.exists() and wal.stat().st_size > 0:
        raise StoreError(f"cannot read the database {path}: {wal.name} beside it holds changes SQLite reads only "
                         f"through {shm.name}, which is missing, and the folder is not writable")
    return uri + "&immutable=1"
