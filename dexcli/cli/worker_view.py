"""`dex worker`: drive every flow of the database and say what each one did."""

from __future__ import annotations

import sys
from collections import Counter

from rich.console import Console

from dexcli.cli.driver import (
    EXIT_OK,
    INTERRUPTED,
    STOP_EXIT_CODES,
    _stop_when_output_closes,
    drive_until,
    json_listener,
    quiet_engine_log,
)
from dexcli.cli.shown import shown
from dexcli.cli.stopping import (
    CLOSED,
    EXIT_OUTPUT_CLOSED,
    SIGNAL_NAMES,
    StopRequest,
    is_closed_pipe,
    silence_stdout,
    stop_signals,
)
from dexcli.cli.worker_idle import idle_wait_lines, left_waiting
from dexcli.engine import Engine
from dexcli.engine.events import Event, Listener
from dexcli.engine.process import tune_gc
from dexcli.store import StoreError
from dexcli.store.errors import DatabaseConditionError


def _worker_listener(console: Console, mode: str, closed: Counter[str]) -> Listener:
    """What `dex worker` prints of the engine's events (JSON lines, or one line per flow closed
    and per failed attempt); `closed["flows"]` counts the flows closed (a count, not their ids:
    a worker may close millions)."""
    def on_event(ev: Event) -> None:
        if ev.type == "flowClosed":
            closed["flows"] += 1
        if mode == "json":
            json_listener(ev)
        elif ev.type == "flowClosed":
            console.print(shown(f"{ev.flow_id}: {ev.data['status']}"
                                + (f" — {ev.data['errorMessage']}" if ev.data.get("errorMessage") else "")),
                          highlight=False)
        elif ev.type == "idleWait":
            for line in idle_wait_lines(ev.data):
                console.print(line, highlight=False, markup=False, soft_wrap=True)
        elif ev.type == "attemptFailed":
            console.print(shown(f"{ev.flow_id}: {ev.data['stepExecutionId']} attempt {ev.data['attempt']} "
                                f"{ev.data['outcome'].lower()}: {ev.data['errorType']}"), highlight=False)

    return on_event


def _say(console: Console, stop: StopRequest, text: str) -> None:
    """Print a line of the worker's own on stdout; a closed stdout stops the worker instead."""
    if stop.output_closed:
        return
    try:
        console.print(text, highlight=False, soft_wrap=True)
    except OSError as exc:
        if not is_closed_pipe(exc):
            raise
        stop.set(CLOSED)


def run_worker(engine: Engine, console: Console, *, until_idle: bool, mode: str, owner: str) -> int:
    """Drive every runnable flow with this engine (built with lease owner `owner`) until
    interrupted (Ctrl-C, SIGTERM, a closed stdout) or idle. Stopped, it releases the attempts it
    was running (see `drive_until`)."""
    closed: Counter[str] = Counter()
    stop = StopRequest()
    engine.events.listeners.append(_worker_listener(console, mode, closed))
    _stop_when_output_closes(engine, stop)
    if mode != "json":
        _say(console, stop, f"dex worker {owner} · db {engine.store.path}"
             + (" · until idle" if until_idle else " · Ctrl-C to stop"))
    tune_gc()  # a worker holds many attempts at once: see dexcli.engine.process
    failures = _store_failures(engine, stop)
    quiet_engine_log()  # a write the database refused is said once, below
    drove = None
    try:
        with stop_signals(stop):  # from before the first claim until what it leased is released
            why, released, drove = drive_until(engine, stop, None, lambda: bool(failures) or stop(),
                                               until_idle=until_idle)
    except DatabaseConditionError as exc:  # one of the engine's own writes (a lease) failed
        why, released = None, 0
        failures.append(exc)
    if failures:  # the database refused a write (disk full, locked, replaced): stop, say so once
        raise StoreError(f"{failures[0]} — the worker stopped; its flows stay RUNNING: run `dex worker` "
                         "(or `dex resume ID`) again once that is fixed (its attempts are then released at once)")
    if why is not None:
        return _worker_stopped(console, stop, why, closed['flows'], released)
    skipped = drove.skipped if drove is not None else {}
    for fid, reason in skipped.items():
        print(f"dex: flow {fid} skipped: {reason}", file=sys.stderr)
    if mode != "json":
        _say(console, stop, f"idle: {closed['flows']} flow(s) finished")
        for line in left_waiting(engine.store, skipped, skipping=engine.clock.auto_advance):
            _say(console, stop, line)
    if stop.output_closed:
        silence_stdout()
        return EXIT_OUTPUT_CLOSED
    return EXIT_OK


def _store_failures(engine: Engine, stop: StopRequest) -> list[DatabaseConditionError]:
    """Writes the database refused, even ones nobody awaits (a heartbeat): the worker stops
    rather than run on losing them."""
    failures: list[DatabaseConditionError] = []

    def on_failure(exc: DatabaseConditionError) -> None:
        failures.append(exc)
        stop.wake()

    engine.store.notify_failures(on_failure)
    return failures


def _worker_stopped(console: Console, stop: StopRequest, why: str, finished: int, released: int) -> int:
    """The worker's one-line summary once stopped early. Returns the exit code."""
    summary = f"{finished} flow(s) finished" + (
        f"; {released} running attempt(s) ended INTERRUPTED (runnable again at once: `dex resume ID` "
        "or a worker)" if released else "")
    code = STOP_EXIT_CODES[why]
    if why != CLOSED:
        _say(console, stop, ("\nworker stopped; " if why == INTERRUPTED else f"worker stopped ({SIGNAL_NAMES[why]}); ")
             + summary)
    if stop.output_closed:  # the summary goes where it can still be read
        silence_stdout()
        print(f"dex: output closed; worker stopped; {summary}", file=sys.stderr)
    return code
