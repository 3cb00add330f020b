"""Lease owners: `host:pid:session`, and whether the process behind one still holds its leases.

A lease held by a process that runs is that process's to end: it heartbeats in real time, so
no other process may make its deadlines pass — by reaping it, or by skipping its flow's clock
(`Store.skip_flows` refuses). A process that exited (a zombie not yet waited for included) or
is stopped (SIGSTOP, a debugger) heartbeats no more: its leases may be skipped over and reaped.
"""

from __future__ import annotations

import os


def owner_pid(owner: str | None) -> int | None:
    """The pid of an owner of this host (None: no owner, or another host's)."""
    if not owner:
        return None
    host, _, rest = owner.partition(":")
    pid_s = rest.partition(":")[0]
    import socket  # only for a lease's owner, not on every import

    if host != socket.gethostname() or not pid_s.isdigit():
        return None
    return int(pid_s)


def _proc_state(pid: int) -> str | None:
    """The process's state letter from /proc (None where there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return None


def owner_alive(owner: str | None) -> bool | None:
    """Whether the process holding a lease still exists (None when it cannot be told: other host)."""
    pid = owner_pid(owner)
    if pid is None:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _proc_state(pid) not in ("Z", "X")  # exited, not yet waited for by its parent


def owner_holds(owner: str | None) -> bool:
    """Whether a live, running process holds this owner's leases (it heartbeats them): not
    one that exited, is stopped, or whose liveness this host cannot tell."""
    pid = owner_pid(owner)
    return bool(owner_alive(owner)) and pid is not None and _proc_state(pid) not in ("T", "t")
