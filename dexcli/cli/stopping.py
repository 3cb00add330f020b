"""Ending a drive early and cleanly: stdout's reader went away, or the process got SIGTERM or
SIGHUP (its terminal closed, an SSH session dropped).

All end the drive the same way: a `StopRequest` is set (from the view's thread, the engine's
listener error handler, a pipe watch or the signal handler of `stop_signals`), the drive's
`until` predicate sees it and the engine's loop is woken, so the drive returns at its next pass
— never in the middle of a transaction. The loop then cancels the attempts it was running and
the driver releases them (`Engine.release_interrupted`: INTERRUPTED, runnable at once).

The signal handler only sets the request: it is installed before the first commit that can
lease (a start, a worker's first claim) and kept until what was leased is released, so a
signal in between — before the loop runs, or after — stops the drive at its first look
instead of killing the process with its leases held.

Exit codes follow the shell's convention for a process a signal ended, 128 + the signal's
number, so `dex` looks to a shell or a `set -o pipefail` script like any other program that
stopped for the same reason (Python ignores SIGPIPE and SIGTERM is handled here, so neither
kills the process; `dex` exits with the code itself, after releasing what it held):
  - 141 (128 + SIGPIPE 13): stdout was closed, e.g. `dex run polling --json | head -1`;
  - 143 (128 + SIGTERM 15): terminated, e.g. by `kill`, a service manager or a container stop;
  - 129 (128 + SIGHUP 1): hung up: the terminal closed, an SSH session dropped.
Ctrl-C stays 130 (128 + SIGINT 2).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator

EXIT_OUTPUT_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for `yes | head -1`
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_HUNG_UP = 129  # 128 + SIGHUP

CLOSED, TERMINATED, HUNG_UP = "closed", "terminated", "hung up"
SIGNAL_NAMES = {TERMINATED: "SIGTERM", HUNG_UP: "SIGHUP"}  # the signals that stop a drive cleanly


def is_closed_pipe(exc: BaseException) -> bool:
    """A write failed because the reader went away (EPIPE; ECONNRESET for a socket)."""
    return isinstance(exc, (BrokenPipeError, ConnectionResetError)) or (
        isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET))


class StopRequest:
    """Why a drive should end before its flow does: `CLOSED` or `TERMINATED` (None: it should
    not). Set from any thread or from the loop; the first reason stays. Use the object itself as
    (part of) the drive's `until` predicate and `waker` as its waker."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.output_closed = False  # stdout's reader went away (whatever the first reason was)
        self._wake: Callable[[], None] | None = None

    def __call__(self) -> bool:
        return self.reason is not None

    def set(self, reason: str) -> None:
        if reason == CLOSED:
            self.output_closed = True
        if self.reason is None:
            self.reason = reason
        self.wake()

    def waker(self, wake: Callable[[], None] | None) -> None:
        """The drive's `waker` (Engine.drive): as the drive begins it hands over a wake that is
        safe from any thread or a signal handler (None as it ends); a request then wakes it."""
        self._wake = wake

    def wake(self) -> None:
        """Make the drive look at its condition again now (one it checks changed), if one runs."""
        wake = self._wake
        if wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: it has stopped anyway
                wake()


@contextlib.contextmanager
def stop_signals(stop: StopRequest) -> Iterator[None]:
    """SIGTERM and SIGHUP set `stop` (TERMINATED, HUNG_UP) while inside: they never kill the
    process between a commit that leased and the release of that lease. Their previous
    handlers come back on the way out. Only the main thread can install handlers: elsewhere
    (a test's thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reasons = {signal.SIGTERM: TERMINATED, signal.SIGHUP: HUNG_UP}

    def on_signal(signum: int, _frame: object) -> None:
        stop.set(reasons[signal.Signals(signum)])

    previous = {sig: signal.signal(sig, on_signal) for sig in reasons}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stdout_pipe_fd() -> int | None:
    """stdout's descriptor when it is a pipe or a socket (whose reader can go away), else None."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # replaced (tests), closed, or no descriptor
        return None
    return fd if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else None


class PipeWatch:
    """Notices, without writing, that stdout's reader has gone: a quiet drive (a long wait with
    nothing new to print) must stop as promptly as a chatty one. Polls stdout's descriptor for
    POLLERR/POLLHUP every `interval` seconds on a daemon thread; does nothing unless stdout is
    a pipe or a socket."""

    def __init__(self, on_closed: Callable[[], None], interval: float = 0.1) -> None:
        self._on_closed = on_closed
        self._interval = interval
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        fd = _stdout_pipe_fd()
        if fd is None or not hasattr(select, "poll"):
            return
        poller = select.poll()
        poller.register(fd, 0)  # no events asked for: POLLERR and POLLHUP are always reported
        self._thread = threading.Thread(target=self._watch, args=(poller,), name="dex-pipe-watch", daemon=True)
        self._thread.start()

    def _watch(self, poller: select.poll) -> None:
        while not self._done.wait(self._interval):
            with contextlib.suppress(OSError):
                if any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0)):
                    self._on_closed()
                    return

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def silence_stdout() -> None:
    """Point stdout's descriptor at /dev/null, so what is still buffered for it (and Python's
    flush at exit) goes nowhere instead of raising BrokenPipeError again ("Exception ignored
    ... BrokenPipeError" on stderr). What Python's documentation recommends after a SIGPIPE."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
