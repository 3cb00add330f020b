"""A real PostgreSQL server for the tests, started in a temporary folder on a free port.

The server binaries are found on PATH or in /usr/lib/postgresql/<version>/bin (Debian's
`postgresql` package; `.ci/run` installs it when missing). PostgreSQL refuses to run as root:
as root, the cluster is made and run as the unprivileged user `nobody` (through runuser).
Without binaries or psycopg the tests skip, except under DEX_PG_REQUIRED=1 (CI), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REQUIRED = os.environ.get("DEX_PG_REQUIRED") == "1"


def binaries() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def unavailable(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"DEX_PG_REQUIRED=1 and {why}")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields a DSN of a fresh server's `postgres` database (user postgres, trust auth)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    bindir = binaries()
    if bindir is None:
        unavailable("no PostgreSQL server binaries (initdb) on this machine")
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="dex-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    prefix: list[str] = []
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
        shutil.chown(sock, "nobody")
        data.mkdir()
        shutil.chown(data, "nobody")
        prefix = ["runuser", "-u", "nobody", "--"]
    port = _free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, cwd="/")

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "sock" / "log"), "-w", "-t", "60",
            "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {exc.stderr.decode(errors='replace')[-500:]}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, cwd="/")
        for _ in range(50):
            if not (data / "postmaster.pid").exists():
                break
            time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
