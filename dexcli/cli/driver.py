"""Drive flows from the command line with a view: live (terminal), plain lines (pipes) or
JSON lines. Shared by `dex run`, `dex resume`, `dex watch` and `dex worker`.

The engine runs on the main thread's event loop; the view reads the database from its own
thread and connection, so it shows only what was committed — the same as `dex inspect`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.live import Live

from dexcli.cli.render import LineDiffer, final_card, header, live_view
from dexcli.engine.clock import Clock, run as run_on_clock
from dexcli.engine.process import tune_gc
from dexcli.engine.core import Engine
from dexcli.engine.events import Event
from dexcli.engine.faults import Faults
from dexcli.engine.views import inspect_flow
from dexcli.loader import load_ref
from dexcli.store import StoreError
from dexcli.sdk.registry import Registry
from dexcli.store import Store

EXIT_OK, EXIT_FLOW_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def make_clock(store: Store, time_skip: bool) -> Clock:
    return Clock(follow_real=True, auto_advance=time_skip, offset=store.clock_offset(),
                 on_advance=store.set_clock_offset if time_skip else None)


def exit_code_for(status: str) -> int:
    return EXIT_OK if status == "COMPLETED" else EXIT_FLOW_FAILED


class View:
    """Shows one flow while something drives it (this process or another)."""

    def __init__(self, console: Console, db: Path, flow_id: str, clock: Clock, mode: str) -> None:
        self.console = console
        self.db = db
        self.flow_id = flow_id
        self.clock = clock
        self.mode = mode  # live | lines | json | quiet
        self._store = Store(db)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._differ = LineDiffer()
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, Any]:
        return inspect_flow(self._store, self.flow_id, self.clock.now())

    def _render(self) -> Any:
        return live_view(self.snapshot(), str(self.db), self.clock.offset)

    def _print_lines(self) -> None:
        with self._lock:
            for line in self._differ.lines(self.snapshot()):
                self.console.print(line, highlight=False, markup=False, soft_wrap=True)

    def start(self) -> None:
        if self.mode == "live":
            self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=8,
                              transient=False, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        elif self.mode == "lines":
            self.console.print(header(self.snapshot(), str(self.db), self.clock.offset), highlight=False)
            self._thread = threading.Thread(target=self._poll_lines, daemon=True)
            self._thread.start()

    def _poll_lines(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self._print_lines()
            except Exception:  # a view must never take the engine down
                pass

    def stop(self, final: bool = True) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        snap = self.snapshot()
        if self._live is not None:
            self._live.update(live_view(snap, str(self.db), self.clock.offset), refresh=True)
            self._live.stop()
        elif self.mode == "lines":
            self._print_lines()
        if final and self.mode in ("live", "lines") and snap["summary"]["flowStatus"] != "RUNNING":
            self.console.print(final_card(snap), highlight=False)
        if self.mode == "json":
            print(json.dumps(snap), flush=True)
        return snap

    def abandon(self) -> None:
        """Leave the screen as it is (the process is about to die): stop redrawing only."""
        if self._live is not None:
            try:
                self._live.stop()
            except Exception:  # the process exits next; a drawing error must not hide why
                pass

    def close(self) -> None:
        self._store.close()


def json_listener(ev: Event) -> None:
    print(json.dumps(ev.as_dict()), flush=True)


def drive_flow(console: Console, db: Path, flow_id: str, *, mode: str, time_skip: bool, faults: Faults,
               crash_after: float | None = None, engine_setup: Callable[[Engine], None] | None = None,
               err: Console) -> int:
    """Drive one flow to its end in this process, showing it. Returns the exit code."""
    store = Store(db)
    clock = make_clock(store, time_skip)
    engine = Engine(store, clock, Registry(), faults=faults, loader=load_ref)
    if engine_setup is not None:
        engine_setup(engine)
    if mode == "json":
        engine.listeners.append(json_listener)
    view = View(console, db, flow_id, clock, mode)

    def crashed(message: str) -> None:
        view.abandon()
        err.print(f"✗ {message} — the process exits now, nothing else is written.\n"
                  f"  Resume with: dex resume {flow_id}" + (" --time-skip" if time_skip else ""), highlight=False)

    faults.on_crash = crashed

    errors: list[str] = []  # reported as one line below, not as the engine's logged traceback
    quiet = logging.getLogger("dexcli.engine")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False

    def on_engine_error(ev: Event) -> None:
        if ev.type == "engineError" and ev.flow_id == flow_id:
            errors.append(ev.data["error"])

    engine.listeners.append(on_engine_error)

    def terminal() -> bool:
        if errors:  # an outcome could not be recorded: nothing more will happen here
            return True
        row = store.get_flow(flow_id)
        return row is None or not row.is_running

    async def main() -> None:
        if crash_after is not None:
            asyncio.get_running_loop().call_at(
                clock.now() + crash_after,
                lambda: faults.crash_now(f"crash injected after {crash_after:g} s (--crash-after)"))
        await engine.run([flow_id], until_idle=False, stop=terminal)

    view.start()
    try:
        run_on_clock(main, clock)
    except KeyboardInterrupt:
        view.stop(final=False)
        view.close()
        err.print(f"\nInterrupted. Flow {flow_id} is still RUNNING in {db}.\n"
                  f"  Resume it with: dex resume {flow_id}\n"
                  "  (an attempt that was running is declared lost after its heartbeat timeout,"
                  " then retried; add --time-skip to skip the wait)", highlight=False)
        return EXIT_INTERRUPTED
    if errors:
        view.stop(final=False)
        view.close()
        store.close()
        raise StoreError(f"flow {flow_id}: an attempt's outcome could not be recorded ({errors[0]}); the flow "
                         f"stays RUNNING — `dex resume {flow_id}` retries once that attempt's lease runs out")
    snap = view.stop()
    view.close()
    store.close()
    return exit_code_for(snap["summary"]["flowStatus"])


def watch_flow(console: Console, db: Path, flow_id: str, *, mode: str, poll: float = 0.2) -> int:
    """Follow a flow another process drives; return when it ends."""
    store = Store(db)
    clock = Clock(offset=store.clock_offset())
    view = View(console, db, flow_id, clock, mode)
    view.start()
    try:
        while True:
            clock.set_offset(store.clock_offset())
            row = store.get_flow(flow_id)
            if row is None or not row.is_running:
                break
            time.sleep(poll)
    except KeyboardInterrupt:
        view.stop(final=False)
        return EXIT_INTERRUPTED
    snap = view.stop()
    view.close()
    return exit_code_for(snap["summary"]["flowStatus"])


def run_worker(console: Console, db: Path, *, until_idle: bool, time_skip: bool, mode: str, faults: Faults) -> int:
    store = Store(db)
    clock = make_clock(store, time_skip)
    engine = Engine(store, clock, Registry(), faults=faults, loader=load_ref)
    closed: list[str] = []

    def on_event(ev: Event) -> None:
        if mode == "json":
            json_listener(ev)
            return
        if ev.type == "flowClosed":
            closed.append(ev.flow_id)
            console.print(f"{ev.flow_id}: {ev.data['status']}"
                          + (f" — {ev.data['errorMessage']}" if ev.data.get("errorMessage") else ""), highlight=False)
        elif ev.type == "attemptFailed":
            console.print(f"{ev.flow_id}: {ev.data['stepExecutionId']} attempt {ev.data['attempt']} "
                          f"{ev.data['outcome'].lower()}: {ev.data['errorType']}", highlight=False)

    engine.listeners.append(on_event)
    if mode != "json":
        console.print(f"dex worker {engine.owner} · db {db}" + (" · until idle" if until_idle else
                                                                 " · Ctrl-C to stop"), highlight=False)
    tune_gc()  # a worker holds many attempts at once: see dexcli.engine.process
    try:
        run_on_clock(lambda: engine.run(None, until_idle=until_idle), clock)
    except KeyboardInterrupt:
        console.print(f"\nworker stopped; {len(closed)} flow(s) finished", highlight=False)
        return EXIT_INTERRUPTED
    for fid, why in engine.unloadable.items():
        print(f"dex: flow {fid} skipped: {why}", file=sys.stderr)
    if mode != "json":
        console.print(f"idle: {len(closed)} flow(s) finished", highlight=False)
    return EXIT_OK
