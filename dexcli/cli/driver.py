"""Drive flows from the command line with a view: live (terminal), plain lines (pipes) or
JSON lines. Shared by `dex run`, `dex resume`, `dex watch` and `dex worker`.

Each command builds one engine on the store it opened (`build_engine`) and drives it through
its face (`Engine.drive`, then `Engine.release`) on the main thread; the view reads the database
from its own thread and connection, so it shows only what was committed — the same as
`dex inspect` — polling it (the live view every 0.25 s, plain lines every 0.2 s; less often
when one read takes long).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.live import Live
from rich.text import Text

from dexcli.builder import build_engine as build
from dexcli.cli.errors import CliError
from dexcli.cli.foreign_events import ForeignEvents, print_json
from dexcli.cli.loader import ref_flows
from dexcli.cli.render import Hanging, LineDiffer, final_card, header, live_view
from dexcli.cli.shown import shown_data
from dexcli.cli.stopping import (
    CLOSED,
    EXIT_HUNG_UP,
    EXIT_OUTPUT_CLOSED,
    EXIT_TERMINATED,
    HUNG_UP,
    SIGNAL_NAMES,
    TERMINATED,
    PipeWatch,
    StopRequest,
    is_closed_pipe,
    silence_stdout,
    stop_signals,
)
from dexcli.engine import Drove, Engine
from dexcli.engine.clock import Clock
from dexcli.engine.definitions import FlowNotRegisteredError
from dexcli.engine.events import Event, Listener
from dexcli.engine.faults import Faults
from dexcli.engine.inspect_json import dex_cli_json
from dexcli.engine.views import inspect_flow
from dexcli.plugins import Hint
from dexcli.sdk.flow import Flow
from dexcli.store import StepState, Store, StoreError
from dexcli.store.errors import DatabaseConditionError, DatabaseReplacedError

EXIT_OK, EXIT_FLOW_FAILED, EXIT_INTERRUPTED = 0, 1, 130
REPAINT_SECONDS = 0.25  # the live view redraws at most 4 times a second, and only on a change
INTERRUPTED = "interrupted"  # Ctrl-C (the other reasons to stop early are in dexcli.cli.stopping)
STOP_EXIT_CODES = {INTERRUPTED: EXIT_INTERRUPTED, CLOSED: EXIT_OUTPUT_CLOSED, TERMINATED: EXIT_TERMINATED,
                   HUNG_UP: EXIT_HUNG_UP}


def make_clock(time_skip: bool) -> Clock:
    """Real time; with time_skip it jumps over idle waits, and the engine moves the clocks of
    the flows it drives by each jump (it follows the clock of the one flow it drives)."""
    return Clock(follow_real=True, auto_advance=time_skip)


def engine_loader(ref: str) -> tuple[Flow[Any], ...]:
    """`ref_flows` for the engine, which skips a flow it cannot load (a DexError) with the reason."""
    try:
        return ref_flows(ref)
    except CliError as exc:
        raise FlowNotRegisteredError(str(exc)) from None


def build_engine(store: Store, *, time_skip: bool, faults: Faults | None = None, owner: str | None = None,
                 attribute_stores: bool = False) -> Engine:
    """The one engine of a `dex` command, on the store it opened: flows it did not register
    itself load from their stored references. Its registry takes async handlers (dex runs them)
    and checks each flow's source statically, as `dex graph` does. With `attribute_stores` (the
    commands that write attributes), the Attribute Stores dex.toml names are opened: one that
    cannot be is an AttributeStoreError (exit 5), as a Dex server refuses to start."""
    from dexcli.cli.config import attribute_stores_setting

    stores = attribute_stores_setting() if attribute_stores else None
    return build(store, clock=make_clock(time_skip), faults=faults, loader=engine_loader, owner=owner,
                 attribute_stores=stores)


def exit_code_for(status: str) -> int:
    return EXIT_OK if status == "COMPLETED" else EXIT_FLOW_FAILED


class View:
    """Shows one flow while something drives it (this process or another)."""

    def __init__(self, console: Console, db: str | Path, flow_id: str, clock: Clock, mode: str,
                 hints: tuple[Hint, ...] = (), on_closed: Callable[[], None] | None = None,
                 rpcs: tuple[str, ...] = ()) -> None:
        self.console = console
        self.rpcs = rpcs
        self.output_closed = False  # stdout's reader went away: nothing more is written
        self._on_closed = on_closed
        self.hints = hints
        self.db = db
        self.flow_id = flow_id
        self.clock = clock
        self.mode = mode  # live | lines | json | quiet
        self._store = Store(db, read_only=True)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._differ = LineDiffer(rpcs)
        self._lock = threading.Lock()
        self._painted: list[Any] | None = None  # the live view's lines as last drawn
        self._read_seconds = 0.0  # how long the last snapshot took to read

    def snapshot(self) -> dict[str, Any]:
        began = time.monotonic()
        snap = inspect_flow(self._store, self.flow_id, self.clock.now())
        self._read_seconds = time.monotonic() - began
        return snap

    def _pause(self, seconds: float) -> float:
        """How long the view waits before it reads again: `seconds`, or longer when a read takes
        long (a flow with a 20 MB input takes seconds to read): the view thread then spends at
        most a fifth of the time reading, and the drive, sharing the GIL, keeps the rest."""
        return max(seconds, 4 * self._read_seconds)

    def shown_snapshot(self) -> dict[str, Any]:
        """The snapshot as the views print it (stored text escaped: dexcli.cli.shown)."""
        snap: dict[str, Any] = shown_data(self.snapshot())
        return snap

    def _render(self) -> Any:
        return live_view(self.shown_snapshot(), str(self.db), self.clock.offset, self.hints, self.rpcs)

    def _output(self, write: Callable[[], object]) -> None:
        """Write to stdout unless its reader went away; a closed pipe is reported once
        (`on_closed`), never raised: a view must not take the engine down."""
        if self.output_closed:
            return
        try:
            write()
        except OSError as exc:
            if not is_closed_pipe(exc):
                raise
            self.closed()

    def closed(self) -> None:
        """stdout's reader went away (seen here or elsewhere): write nothing more."""
        if not self.output_closed:
            self.output_closed = True
            if self._on_closed is not None:
                self._on_closed()

    def _print_lines(self) -> None:
        with self._lock:
            lines = self._differ.lines(self.shown_snapshot())

            def write() -> None:
                for line in lines:
                    self.console.print(line, highlight=False, markup=False, soft_wrap=True)

            self._output(write)

    def repaint(self) -> bool:
        """Redraw the live view if what it shows changed since the last redraw; returns whether
        it redrew. Rich's own timer would redraw the whole block 8 times a second, changed or
        not, and a terminal (tmux, ssh) can catch it half-drawn."""
        live = self._live
        if live is None:
            return False
        view = self._render()
        lines = self.console.render_lines(view, self.console.options, pad=False)
        if lines == self._painted:
            return False
        self._painted = lines
        self._output(lambda: live.update(view, refresh=True))
        return True

    def _poll_live(self) -> None:
        while not self._stop.wait(self._pause(REPAINT_SECONDS)) and not self.output_closed:
            with contextlib.suppress(Exception):  # a view must never take the engine down
                self.repaint()

    def start(self) -> None:
        if self.mode == "live":
            self._live = Live(console=self.console, auto_refresh=False, transient=False,
                              redirect_stdout=False, redirect_stderr=False)
            self._live.start()
            self.repaint()
            self._thread = threading.Thread(target=self._poll_live, daemon=True)
            self._thread.start()
        elif self.mode == "lines":
            head = header(self.shown_snapshot(), str(self.db), self.clock.offset)
            self._output(lambda: self.console.print(head, highlight=False))
            self._thread = threading.Thread(target=self._poll_lines, daemon=True)
            self._thread.start()

    def _poll_lines(self) -> None:
        while not self._stop.wait(self._pause(0.2)) and not self.output_closed:
            with contextlib.suppress(Exception):  # a view must never take the engine down
                self._print_lines()

    def stop(self, final: bool = True) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        snap = self.snapshot()
        view = shown_data(snap)
        if self._live is not None:
            self._live.update(live_view(view, str(self.db), self.clock.offset, self.hints, self.rpcs),
                              refresh=True)
            self._live.stop()
        elif self.mode == "lines":
            self._print_lines()
        if final and self.mode in ("live", "lines") and snap["summary"]["flowStatus"] != "RUNNING":
            self._output(lambda: self.console.print(final_card(view), highlight=False))
        if self.mode == "json":
            self._output(lambda: print(json.dumps(dex_cli_json(snap)), flush=True))
        return snap

    def abandon(self) -> None:
        """Leave the screen as it is (the process is about to die): stop redrawing only."""
        if self._live is not None:
            with contextlib.suppress(Exception):  # the process exits next; a drawing error must not hide why
                self._live.stop()

    def close(self) -> None:
        self._store.close()


def quiet_engine_log() -> None:
    """The engine's logged errors (an unrecorded outcome, its traceback): the command says them in one line."""
    quiet = logging.getLogger("dexcli.engine")
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False


def json_listener(ev: Event) -> None:
    print(json.dumps(ev.as_dict()), flush=True)


def _json_lines(flow_id: str) -> Listener:
    """`dex run --json`'s listener: the events from the flow's flowStarted on (a start that
    ends a previous run under the same id, by its id reuse policy, reports that close first)."""
    started = False

    def listener(ev: Event) -> None:
        nonlocal started
        started = started or (ev.type == "flowStarted" and ev.flow_id == flow_id)
        if started:
            json_listener(ev)

    return listener


def _stop_when_output_closes(engine: Engine, stop: StopRequest) -> None:
    """A listener that writes to a closed stdout (the engine removes it) stops the drive; any
    other listener error goes to the engine's own handler, as before."""
    previous = engine.events.on_listener_error

    def on_listener_error(listener: Listener, exc: Exception) -> None:
        if is_closed_pipe(exc):
            stop.set(CLOSED)
        else:
            previous(listener, exc)

    engine.events.on_listener_error = on_listener_error


def drive_until(engine: Engine, stop: StopRequest, flow_ids: list[str] | None, until: Callable[[], bool], *,
                until_idle: bool = False, begin: Callable[[], None] | None = None
                ) -> tuple[str | None, int, Drove | None]:
    """Drive until `until()` (or idle), with the stop request attached (`begin` is called on the
    drive's loop as it begins) and stdout watched. Returns why it stopped early (INTERRUPTED for
    Ctrl-C, CLOSED, TERMINATED; None: it ended by its own condition), how many running attempts
    were released, and how the drive ended (None: Ctrl-C).

    However the drive ends, its loop cancels the attempts it was running; they are released at
    once (`Engine.release`: INTERRUPTED, runnable again) rather than left to their heartbeat
    timeouts. Any other error propagates after that."""
    watch = PipeWatch(lambda: stop.set(CLOSED))

    def waker(wake: Callable[[], None] | None) -> None:
        stop.waker(wake)
        if wake is not None and begin is not None:
            begin()

    watch.start()
    try:
        drove = engine.drive(flow_ids, until=until, until_idle=until_idle, release=False, waker=waker)
    except KeyboardInterrupt:
        return INTERRUPTED, engine.release(), None
    except BaseException:
        engine.release()
        raise
    finally:
        watch.stop()
    released = engine.release()
    engine.store.commit_deferred()  # what the command reports next is durable (docs/durability.md)
    return stop.reason, released, drove


def rpc_names(engine: Engine, flow_id: str) -> tuple[str, ...]:
    """The RPC names of a flow's class, to offer in the view ((): its code cannot be loaded)."""
    row = engine.store.get_flow(flow_id)
    if row is None:
        return ()
    try:
        return tuple(sorted(engine.definitions.get(row.flow_type, row.flow_ref).rpcs))
    except Exception:  # an unloadable flow is reported by the drive itself
        return ()


def drive_flow(engine: Engine, console: Console, flow_id: str, *, mode: str, time_skip: bool,
               err: Console, crash_after: float | None = None, hints: tuple[Hint, ...] = (),
               start: Callable[[], object] | None = None, faults: Faults | None = None) -> int:
    """Drive one flow to its end with this engine, showing it. Returns the exit code.

    `start` (`dex run`) starts the flow once the view listens, so `--json` begins with its
    flowStarted; a Ctrl-C, SIGTERM or SIGHUP from then until the drive gives back the first
    attempt's lease. `faults` are the ones the engine was built with (`dex run --crash-at`...)."""
    stop = StopRequest()
    with stop_signals(stop):  # from before the start's commit until what it leased is released
        return _drive_flow(engine, console, flow_id, stop, mode=mode, time_skip=time_skip, err=err,
                           crash_after=crash_after, hints=hints, start=start, faults=faults or Faults())


def _drive_flow(engine: Engine, console: Console, flow_id: str, stop: StopRequest, *, mode: str, time_skip: bool,
                err: Console, crash_after: float | None, hints: tuple[Hint, ...],
                start: Callable[[], object] | None, faults: Faults) -> int:
    clock, store = engine.clock, engine.store
    if mode == "json":
        engine.events.listeners.append(_json_lines(flow_id) if start is not None else json_listener)
    _stop_when_output_closes(engine, stop)
    errors = _engine_errors(engine, flow_id, stop)

    def closed() -> bool:
        flow = store.get_flow(flow_id)
        return flow is None or not flow.is_running

    view: View | None = None

    def crashed(message: str) -> None:
        if view is not None:
            view.abandon()
        err.print(f"✗ {message} — the process exits now, nothing else is written.\n"
                  f"  Resume with: dex resume {flow_id}" + (" --time-skip" if time_skip else ""), highlight=False)

    def begin() -> None:
        if crash_after is not None:
            asyncio.get_running_loop().call_at(
                clock.now() + crash_after,
                lambda: faults.crash_now(f"crash injected after {crash_after:g} s (--crash-after)"))

    faults.on_crash = crashed
    try:
        if start is not None:
            start()
        view = View(console, engine.store.path, flow_id, clock, mode, hints, on_closed=lambda: stop.set(CLOSED),
                    rpcs=rpc_names(engine, flow_id))
        view.start()
    except KeyboardInterrupt:  # nothing ran yet: a lease the start took is given back
        return _stopped_early(engine, view, err, flow_id, INTERRUPTED, engine.release())
    foreign = _follow_others(engine, flow_id) if mode == "json" else None
    try:
        # an outcome that could not be recorded ends the drive: nothing more will happen here
        why, released, _ = drive_until(engine, stop, [flow_id], lambda: bool(errors) or stop() or closed(),
                                       begin=begin)
    except DatabaseConditionError as exc:  # one of the engine's own writes failed (a lease, the clock)
        why, released = None, 0
        errors.append(str(exc))
    finally:
        if foreign is not None:
            foreign.stop()
    if why is not None:
        return _stopped_early(engine, view, err, flow_id, why, released)
    if errors:
        _not_recorded(engine, view, flow_id, errors[0])
    snap = view.stop()
    view.close()
    if view.output_closed:
        silence_stdout()
        return EXIT_OUTPUT_CLOSED
    _say_unfired(err, faults, crash_after)
    return exit_code_for(snap["summary"]["flowStatus"])


def _say_unfired(err: Console, faults: Faults, crash_after: float | None) -> None:
    """The injected faults this run never reached, on stderr: the flow's exit code stays its own
    (0 says it completed, not that it survived a crash)."""
    unfired = faults.unfired()
    if crash_after is not None:
        unfired.append(f"--crash-after {crash_after:g}s never fired: the flow ended first")
    for line in unfired:
        err.print(f"dex: warning: {line}", highlight=False, markup=False, soft_wrap=True)


def _not_recorded(engine: Engine, view: View, flow_id: str, error: str) -> NoReturn:
    """The drive ended because a write failed: say so in one line (raises)."""
    view.stop(final=False)
    view.close()
    failure = engine.store.failure
    if isinstance(failure, DatabaseReplacedError):
        raise failure
    if failure is not None:  # the database itself failed: say so in its words
        raise StoreError(f"{failure} — flow {flow_id} is still RUNNING: `dex resume {flow_id}` once that is fixed")
    raise StoreError(f"flow {flow_id}: an attempt's outcome could not be recorded ({error}); the flow "
                     f"stays RUNNING — `dex resume {flow_id}` retries once that attempt's lease runs out")


def _follow_others(engine: Engine, flow_id: str) -> ForeignEvents:
    """JSON lines for what other processes do to the flow (RPCs, skipped timers)."""
    foreign = ForeignEvents(str(engine.store.path), flow_id, print_json)
    foreign.start()
    return foreign


def _stopped_early(engine: Engine, view: View | None, err: Console, flow_id: str, why: str, released: int) -> int:
    """The drive stopped before its flow ended (Ctrl-C, SIGTERM, a closed stdout), or before it
    began (view None): say how to resume the flow if it is still RUNNING. Returns the exit code."""
    code = STOP_EXIT_CODES[why]
    if view is not None:
        if why == CLOSED:
            view.closed()
        view.stop(final=False)
        view.close()
        if view.output_closed:  # (also when stdout closed after another reason to stop)
            silence_stdout()
    flow = engine.store.get_flow(flow_id)
    if flow is None:  # interrupted before the start committed
        err.print(f"\nInterrupted. Flow {flow_id} was not started.", highlight=False)
        return code
    if not flow.is_running:
        return code
    if why == CLOSED:  # one line: whoever closed the pipe asked for less output, not more
        err.print(f"dex: output closed; flow {flow_id} is still RUNNING — resume it with: dex resume {flow_id}"
                  + (" (its running attempt ended INTERRUPTED: the next one starts at once)" if released else ""),
                  highlight=False)
        return code
    title = {INTERRUPTED: "\nInterrupted.", HUNG_UP: f"Hung up ({SIGNAL_NAMES[HUNG_UP]}).",
             TERMINATED: f"Terminated ({SIGNAL_NAMES[TERMINATED]})."}[why]
    message = (f"{title} Flow {flow_id} is still RUNNING in {engine.store.path}.\n"
               f"  Resume it with: dex resume {flow_id}\n  " + _what_was_running(engine, flow_id, released))
    for line in message.split("\n"):  # in a terminal, wrapped between words under itself; else whole lines
        err.print(Hanging(Text(line)) if err.is_terminal else line, highlight=False, soft_wrap=not err.is_terminal)
    return code


def _what_was_running(engine: Engine, flow_id: str, released: int) -> str:
    """What became of the flow's attempts when its drive stopped (the note under "Resume it with")."""
    if released:
        return ("(the attempt that was running ended INTERRUPTED; resume starts the next one at once,"
                " from its last checkpoint)")
    steps = engine.store.steps_of(flow_id)
    if any(s.status is StepState.RUNNING for s in steps):
        return ("(an attempt that was running is declared lost after its heartbeat timeout,"
                " then retried; add --time-skip to skip the wait)")
    queued = [s.step_execution_id for s in steps if s.status is StepState.QUEUED]
    if queued:
        return f"(no attempt was running: {queued[0]} is queued, and resume or `dex worker` starts it)"
    return "(no attempt was running; a waiting step keeps its wait and its timers' firing times)"


def _engine_errors(engine: Engine, flow_id: str, stop: StopRequest) -> list[str]:
    """The engine's errors about this flow, collected as they happen (reported as one line, not
    as the engine's logged traceback)."""
    errors: list[str] = []
    quiet_engine_log()

    def on_engine_error(ev: Event) -> None:
        if ev.type == "engineError" and ev.flow_id == flow_id:
            errors.append(ev.data["error"])

    def on_store_failure(exc: DatabaseConditionError) -> None:
        """A write the database refused (disk full, locked, file replaced), even one nobody
        awaits (a heartbeat, a Stream message): the drive ends rather than run on losing writes."""
        errors.append(str(exc))
        stop.wake()

    engine.events.listeners.append(on_engine_error)
    engine.store.notify_failures(on_store_failure)
    return errors


def watch_flow(console: Console, store: Store, flow_id: str, *, mode: str, poll: float = 0.2,
               hints: tuple[Hint, ...] = ()) -> int:
    """Follow a flow another process drives; return when it ends (or stdout's reader goes)."""
    first = store.get_flow(flow_id)
    clock = Clock(offset=first.clock_offset if first is not None else 0.0)  # the flow's clock
    stop = StopRequest()
    view = View(console, store.path, flow_id, clock, mode, hints, on_closed=lambda: stop.set(CLOSED),
                rpcs=())  # (read-only: no flow code is imported to learn its RPC names)
    watch = PipeWatch(lambda: stop.set(CLOSED))
    view.start()
    watch.start()
    try:
        while not stop():
            row = store.get_flow(flow_id)
            if row is None or not row.is_running:
                break
            clock.set_offset(row.clock_offset)
            time.sleep(poll)
    except KeyboardInterrupt:
        view.stop(final=False)
        view.close()
        return EXIT_INTERRUPTED
    finally:
        watch.stop()
    if stop.output_closed:
        view.closed()
    snap = view.stop(final=not view.output_closed)
    view.close()
    if view.output_closed:
        silence_stdout()
        return EXIT_OUTPUT_CLOSED
    return exit_code_for(snap["summary"]["flowStatus"])


