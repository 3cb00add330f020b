"""The engine: takes runnable step executions, runs their attempts under Dex's limits, and
commits each outcome through a transition (dexcli.engine.transitions).

Rules (see the seed and reference/dex-semantics.md):
  - ExecuteMethodTimeout bounds one attempt (StartToClose).
  - HeartbeatTimeout: no heartbeat and no Stream message within the window (Heartbeat).
  - TotalDuration counts from when the first attempt was scheduled, covers every retry and also
    ends a running attempt (ScheduleToClose); a retry starts only while it has time left.
  - Retries back off initial * coefficient^(n-1), capped; retry_after replaces one delay.
  - Exhausted: the execute-failure route gets a new execution with the same input and
    `recovery_error`; without one the flow fails with WORKER_API_FAILED.

Several processes may share one database. An attempt belongs to the process that leased it;
another process declares it lost only once one of its deadlines has passed, and every write of
a stale owner is fenced by (owner, attempt, status) in its WHERE clause.

This module keeps the loop (`run`), attempts' lifecycles and their watchdogs (an attempt of a
plain sync handler runs without a task: sync_attempt); what each commit writes is in
transitions, what an ended attempt amounts to in outcome, the unit that commits it and what
follows that commit in endings, heartbeats' units in outputs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, overload

from dexcli.engine import rpc
from dexcli.engine import transitions as t
from dexcli.engine.activity import Activity, AttemptHere
from dexcli.engine.attempt import STOPPING, AttemptHost, AttemptRun, invoke, step_input
from dexcli.engine.attribute_sync import AttributeStores, AttributeSync, check_names
from dexcli.engine.batch import GroupCommit
from dexcli.engine.changes import Change, ContinueAsNew, SkipTimer, StopFlow, TimeSkip, UpdateFlowConfig
from dexcli.engine.clock import Clock
from dexcli.engine.clock import run as run_on_clock
from dexcli.engine.definitions import Definitions, Loader, cannot_run
from dexcli.engine.drives import DriveEndedError, Drives, LoopGoneError, task_waiter, thread_waiter
from dexcli.engine.endings import Endings, EndingsHooks
from dexcli.engine.events import Emitter
from dexcli.engine.faults import Faults
from dexcli.engine.host import StoreHost, current_flow
from dexcli.engine.outcome import judge
from dexcli.engine.outputs import OutputQueue
from dexcli.engine.process import process_owner
from dexcli.engine.schedule import Scheduler, SchedulerHooks
from dexcli.engine.start_batch import StartBatches
from dexcli.engine.start_request import start_request
from dexcli.engine.step_threads import on_handler_thread
from dexcli.engine.sync_attempt import SyncAttempt, SyncHooks, halt
from dexcli.engine.transitions import waiting as w
from dexcli.engine.transitions.time_travel import TimeTravelRequest, check_request, time_travel
from dexcli.engine.watch import Watch
from dexcli.host import reset_host, use_host
from dexcli.sdk.errors import AttemptFencedError, FlowDefinitionError, FlowNotActiveOrNotFoundError
from dexcli.sdk.flow import Flow
from dexcli.sdk.registry import FlowDefinition, Registry
from dexcli.sdk.results import StartFlowOptions
from dexcli.sdk.rpc import RPCInvokeOptions, RpcSpec
from dexcli.store import FlowState, Method, Skipped, StepState, Store
from dexcli.store.errors import DatabaseReplacedError

log = logging.getLogger("dexcli.engine")

Waker = Callable[[Callable[[], None] | None], None]


@dataclass(frozen=True)
class Drove:
    """How a drive ended: the attempts its release ended INTERRUPTED (0 when it left the
    release to its caller, or waited for another thread's loop), and the flows it skipped
    because this process cannot load their code (flow id -> why)."""

    released: int = 0
    skipped: dict[str, str] = field(default_factory=dict)


class Engine:
    def __init__(self, store: Store, clock: Clock, registry: Registry | None = None, *,
                 owner: str | None = None, faults: Faults | None = None, loader: Loader | None = None) -> None:
        self.store = store
        self.clock = clock
        self.definitions = Definitions(registry or Registry(allow_async_handlers=True), loader)
        self._faults = faults or Faults()
        self.events = Emitter(clock.now)
        self._commits = GroupCommit(store)
        self._host = StoreHost(store, clock, self._commits, self._now)
        self._runs: dict[tuple[str, str], AttemptRun] = {}
        self._by_flow: dict[str, set[tuple[str, str]]] = {}
        self._runs_lock = threading.Lock()  # `runs` and `_by_flow` change on the loop and on chains' threads
        self._stats = {"attempts": 0, "transitions": 0, "flows_closed": 0}
        self._offsets: dict[str, float] = {}  # flow id -> its clock offset, where not 0 (see Scheduler)
        # the helpers get collaborators and callbacks, never the engine
        self._scheduler = Scheduler(
            SchedulerHooks(store, clock, self.definitions, self.events, self._offsets, self._runs, self._now,
                           self._claim, self._reap, self._rearm, self._start_attempt, self._project),
            owner or process_owner())
        self._outputs = OutputQueue(clock, self._commits, self.events, self._faults)
        self._attempt_host = AttemptHost(self._faults, self._now, self._outputs.of)
        # what each ended attempt commits, and what follows its commit
        self._endings = Endings(EndingsHooks(self._faults, self._commits, self.events, self.definitions,
                                             self._scheduler, self._stats, self._offsets, self._runs, self._now,
                                             self._start_attempt, self._runs_of))
        self._starts = StartBatches(self._commits, self._now, self._after_start)  # AsyncClient starts, batched
        self._deadlines: Watch | None = None  # attempts' watchdogs, on run()'s loop
        self._halting = False  # run()'s attempts are being stopped: no chain of sync steps goes on
        self._sync = SyncHooks(store, self._faults, self.events, self.definitions, self._commits, self._endings,
                               self._now, self._attempt_started, self._interrupted, self._unrecorded,
                               self._attempt_ended, self._arm, self._successor, lambda: self._halting,
                               self._tidy)
        self._context: contextvars.Context | None = None  # run()'s, with the host set
        self._stopped: list[AttemptRun] = []  # attempts cancelled because this process stops
        self._unstarted: list[t.Leased] = []  # leased as run() was ending: given back, never begun
        self._drives = Drives()  # which loop runs this engine; where other threads' calls go
        self._attribute_sync: AttributeSync | None = None  # the Attribute Store's writer (use_attribute_stores)
        self._attribute_stores = AttributeStores()  # the stores a FlowConfig may name (none until given)
        # set to a list to collect how long each heartbeat/Stream unit waited for its commit (bench)

    # ------------------------------------------------------------------ facade -----------
    # The face every caller uses (the CLI, Client/AsyncClient, Worker, DexTestEnv): store, clock,
    # definitions (the registry and the flows loaded by reference), events, check_runnable,
    # start_flow(_async), drive(_async), change, invoke_rpc(_async), release, activity,
    # use_attribute_stores. Everything else is private: the engine's parts get hooks.
    @property
    def _owner(self) -> str:
        return self._scheduler.owner

    @property
    def _unloadable(self) -> dict[str, str]:
        """Flow id -> why this process cannot load its code (it is skipped)."""
        return self.definitions.unloadable

    def check_runnable(self, flow_id: str) -> None:
        """Refuse a flow this process cannot run (an open step's class is gone, its code does not
        load) before a drive of it starts: then nothing of it has changed, and nothing is shown."""
        self._scheduler.find_unloadable([flow_id])
        reason = self._unloadable.get(flow_id)
        if reason is not None:
            raise cannot_run(flow_id, reason)

    @overload
    def use_attribute_stores(self, config: AttributeStores) -> AttributeSync: ...
    @overload
    def use_attribute_stores(self, config: None) -> None: ...
    def use_attribute_stores(self, config: AttributeStores | None) -> AttributeSync | None:
        """Project synced attributes into these stores (dex.toml's [attribute_store]): each
        is opened now (AttributeStoreError if one cannot be), and what the outbox holds (left
        by a process that died) is written at once. The stores used before are closed first;
        None closes them and projects nothing more (what is marked stays in the outbox)."""
        if self._attribute_sync is not None:
            self.store.on_attribute_sync(None)
            self._attribute_sync.close()
            self._attribute_sync = None
        self._attribute_stores = config or AttributeStores()
        if config is None:
            return None
        sync = AttributeSync(self.store, config, self.clock.real, names_of=self._store_names_of,
                             report=lambda line: log.warning("%s", line))
        sync.open()
        self._attribute_sync = sync
        self.store.on_attribute_sync(sync.kick)
        sync.kick()
        return sync

    def _store_names_of(self, flow_id: str) -> list[str] | None:
        """A flow's FlowConfig attribute_store_names (None: not set, dex.toml's default store)."""
        flow = self.store.get_flow(flow_id)
        return None if flow is None else flow.attribute_store_names

    def _check_store_names(self, config: dict[str, Any]) -> None:
        """Refuse a FlowConfig (a start's config_override, an update) that names an Attribute
        Store this engine was not given: UnknownAttributeStoreError, before anything is written."""
        names = config.get("attributeStoreNames")
        if names is not None:
            check_names(list(names.get("names", [])), self._attribute_stores)

    def _project(self) -> None:
        if self._attribute_sync is not None:
            self._attribute_sync.kick()

    def _now(self, flow_id: str | None = None) -> float:
        """The time on a flow's clock (real time plus the flow's offset), or real time."""
        return self.clock.real() + (self._offsets.get(flow_id, 0.0) if flow_id is not None else 0.0)

    def _fresh_now(self, flow_id: str) -> float:
        """`now(flow_id)` with the flow's offset read again (for a flow this engine may not drive)."""
        self._offsets.pop(flow_id, None)
        self._offsets.update(self.store.flow_offsets([flow_id]))
        return self._now(flow_id)

    def _wake(self) -> None:
        """Make the loop look at the database again now (something changed)."""
        self._scheduler.wake()

    def _emit(self, type_: str, flow_id: str, **data: Any) -> None:
        self.events.emit(type_, flow_id, **data)

    # ------------------------------------------------------------------ start ------------
    def start_flow(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None, *,
                   flow_ref: str | None = None, request_id: str | None = None,
                   ignore_already_started: bool = False, options: StartFlowOptions | None = None,
                   lease: bool = False, setup: Callable[[], object] | None = None) -> str:
        """Create the run and queue its start step (one transaction). Returns the run id.
        `options` (timeout, start delay, id reuse; its request id and ignore_already_started
        replace the keywords') as dexcli.engine.flow_timeout and id_reuse apply them. `lease`
        (outside run(): the caller drives the flow next) leases the first attempt to the next
        run() in the same transaction; it starts there without a claim (see Scheduler.reserve).
        Called on another thread while run() goes on (a step's client), it runs on run()'s loop,
        and run() drives the new flow too. `setup` (a flow plugin's `before_start`) is called
        once the start is known not to be refused for its flow id, before it commits."""
        def start() -> str:
            req = start_request(self.definitions, flow, flow_id, input, flow_ref, request_id,
                                ignore_already_started, options)
            if req.settings.flow_config:
                self._check_store_names(json.loads(req.settings.flow_config))
            if setup is not None:
                existing = self.store.get_flow(req.flow_id)
                if existing is None or not t.answered(req, existing):  # (a refused start raises)
                    setup()
            if lease:  # decoding's set-up (pydantic, validators) before the lease, not in the attempt's time
                self.definitions.prepare()
            owner = self._scheduler.reserve() if lease else None
            with self.store.tx() as tx:
                started = t.start(tx, req, self._now(req.flow_id), owner)
            self._after_start(req, started)
            return started.run_id

        return self._drives.on_loop(start)

    async def start_flow_async(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None, *,
                               flow_ref: str | None = None, request_id: str | None = None,
                               ignore_already_started: bool = False, options: StartFlowOptions | None = None
                               ) -> str:
        """`start_flow` for code on the engine's loop. Starts requested in the same loop pass
        share one transaction (group commit), written together (dexcli.engine.start_batch); each
        returns once committed, or raises its own error. While this engine
        runs every flow (a worker), the start step's first attempt is leased to it in that
        transaction and starts at once."""
        req = start_request(self.definitions, flow, flow_id, input, flow_ref, request_id, ignore_already_started,
                            options)
        if req.settings.flow_config:
            self._check_store_names(json.loads(req.settings.flow_config))
        self._scheduler.adopt(req.flow_id)
        owner = self._owner if self._scheduler.drives(req.flow_id) else None
        return (await self._starts.submit(req, owner)).run_id

    def _after_start(self, req: t.StartRequest, started: t.Started) -> None:
        if started.terminated is not None:  # ALLOW_TERMINATE_IF_RUNNING ended the previous run
            self._endings.after_close(req.flow_id, started.terminated)
        if started.created:
            self._scheduler.adopt(req.flow_id)
            self._scheduler.closed(req.flow_id, reopened=True)
            self._emit("flowStarted", req.flow_id, flowType=req.definition.flow_type, runId=started.run_id)
        if started.leased is not None and self._scheduler.running:
            self._start_attempt(started.leased, self._now(req.flow_id))
        elif started.leased is not None:  # start_flow(lease=True): the next run() starts it
            self._scheduler.hold(started.leased, bool(req.settings.timeout))
        self._wake()

    # ------------------------------------------------------------------ driving ----------
    async def _run(self, flow_ids: list[str] | None = None, *, until_idle: bool = True,
                  stop: Callable[[], bool] | None = None, stop_poll: float | None = None) -> None:
        """Drive flows until `stop()` is true, or (until_idle) nothing of them is left to run.

        flow_ids=None drives every flow in the database (a worker). `stop` is checked whenever
        something changes, and at least every `stop_poll` seconds of the engine's clock.

        Each call leases under a new owner id: an attempt a previous call left running (it was
        stopped mid-attempt) is then treated like a crashed process's — declared lost once its
        heartbeat deadline passes, and retried. (Its owner id is fixed before it starts when a
        `start_flow(lease=True)` leased a first attempt to it; this call starts that attempt.)
        """
        self.definitions.prepare()
        token = use_host(self._host)
        self._drives.begin(asyncio.get_running_loop(), self._scheduler.accept)
        self._stopped = []
        self._halting = False
        if self._deadlines is None or self._deadlines.loop is not asyncio.get_running_loop():
            self._deadlines = Watch(asyncio.get_running_loop(), self._watch, eager=self.clock.auto_advance)
        self._context = contextvars.copy_context()  # attempts run in it, whoever started them
        teardown = getattr(asyncio.get_running_loop(), "teardown", None)  # ClockEventLoop's
        if teardown is not None and self._halt not in teardown:
            teardown.append(self._halt)  # its close stops them as it cancels attempts' tasks
        idle = getattr(asyncio.get_running_loop(), "idle", None)
        if idle is not None and self._commits.idle not in idle:
            idle.append(self._commits.idle)
        try:
            await self._scheduler.loop(flow_ids, until_idle, stop, stop_poll)
        except asyncio.CancelledError:  # stopping: attempts without a task stop too, not committed
            self._halt()
            raise
        finally:
            self._drives.end()
            reset_host(token)
            self._commits.flush()  # what ASYNC left open is not committed here (async_commits)

    # ------------------------------------------------------------------ drive (one face) --
    def drive(self, flow_ids: list[str] | None, *, until: Callable[[], bool] | None = None,
              until_idle: bool = False, deadline: float | None = None, poll: float | None = None,
              release: bool = True, waker: Waker | None = None) -> Drove:
        """Drive flows until `until()` holds (checked on every change, and every `poll` seconds),
        `deadline` (engine clock) passes, or with `until_idle` nothing of them is left to run.

        With no loop running, it runs one on this thread and, when it ends however it ends,
        releases what it leased and did not finish (attempts INTERRUPTED and runnable at once;
        leases never begun given back), never leaving them to a heartbeat timeout. Called while
        a loop runs elsewhere (from a step's handler thread, or another thread) it waits for
        that loop to meet the condition instead, and the loop drives these flows meanwhile.

        `release=False` leaves the release to the caller (`release()`, once it has handled how the
        drive ended). `waker`, when this call runs the loop, is called on it as the drive begins
        with a function that wakes the drive from any thread or a signal handler (after a stop
        condition of the caller's changed), and with None as it ends."""
        while True:
            if self._drives.claim():
                try:
                    released = self._drive_here(flow_ids, until, until_idle, deadline, poll, release, waker)
                finally:
                    self._drives.release()
                return Drove(released, dict(self._unloadable))
            if self._drives.on_loop_thread():
                raise RuntimeError("a blocking client call on the engine's own event loop (in async code): "
                                   "use AsyncClient and await it")
            outside = current_flow.get() is None
            waiter, future = thread_waiter(*self._nested(flow_ids, until, until_idle, deadline),
                                           holds_thread=on_handler_thread(), outside=outside)
            if not self._drives.hand(waiter):
                self._drives.settle(0.01)  # a loop is starting or ending on another thread
                continue
            try:
                future.result()
                return Drove()
            except LoopGoneError:
                continue
            except DriveEndedError:
                if not outside:
                    raise
                continue

    async def drive_async(self, flow_ids: list[str] | None, *, until: Callable[[], bool] | None = None,
                          until_idle: bool = False, deadline: float | None = None, poll: float | None = None,
                          release: bool = True, waker: Waker | None = None) -> Drove:
        """`drive` for async code. On the loop that runs this engine (an async step's client,
        code beside a worker) it waits for that loop to meet the condition; with no loop running
        it runs the engine here and (`release`) releases what it leaves, as `drive` does; `waker`
        as for `drive`. `release=False` is the drive of the loop's owner (a worker, `dex run`):
        it begins at once, and a client's drive made next on that loop waits in it."""
        loop = asyncio.get_running_loop()
        if self._drives.loop is None and release:  # (release=False: the loop's own drive, which begins at once)
            await asyncio.sleep(0)  # a run() scheduled on this loop just before (a worker's task) begins
        if self._drives.loop is loop:
            waiter, future = task_waiter(*self._nested(flow_ids, until, until_idle, deadline),
                                         outside=current_flow.get() is None)
            self._scheduler.accept(waiter)
            await future
            return Drove()
        if self._drives.loop is not None:  # a loop on another thread runs it
            waiter, thread_future = thread_waiter(*self._nested(flow_ids, until, until_idle, deadline),
                                                  holds_thread=False, outside=True)
            if self._drives.hand(waiter):
                await asyncio.wrap_future(thread_future)
                return Drove()
        released = 0
        try:
            await self._drive(flow_ids, until, until_idle, deadline, poll, waker)
        finally:
            if release:
                released = await self._stop_left()
        return Drove(released, dict(self._unloadable))

    def _drive_here(self, flow_ids: list[str] | None, until: Callable[[], bool] | None, until_idle: bool,
                    deadline: float | None, poll: float | None, release: bool, waker: Waker | None) -> int:
        released = 0
        try:
            run_on_clock(lambda: self._drive(flow_ids, until, until_idle, deadline, poll, waker), self.clock)
        finally:
            if release:
                with contextlib.suppress(Exception):  # an error that ended the drive matters more
                    released = self._release_interrupted()
        return released

    async def _drive(self, flow_ids: list[str] | None, until: Callable[[], bool] | None, until_idle: bool,
                     deadline: float | None, poll: float | None, waker: Waker | None = None) -> None:
        stop = until
        if deadline is not None:
            clock = self.clock

            def stop() -> bool:
                return clock.now() >= deadline or (until is not None and until())

            asyncio.get_running_loop().call_at(deadline, self._wake)
        if stop is not None and stop():
            return
        if waker is None:
            await self._run(flow_ids, until_idle=until_idle, stop=stop, stop_poll=poll)
            return
        loop = asyncio.get_running_loop()

        def wake() -> None:
            loop.call_soon_threadsafe(self._wake)

        waker(wake)
        try:
            await self._run(flow_ids, until_idle=until_idle, stop=stop, stop_poll=poll)
        finally:
            waker(None)

    def _nested(self, flow_ids: list[str] | None, until: Callable[[], bool] | None, until_idle: bool,
                deadline: float | None) -> tuple[frozenset[str] | None, Callable[[], bool], float | None]:
        """A nested drive's scope, condition and deadline. Its "until idle" is: its flows have
        all closed (what else runs belongs to the loop's own drive)."""
        if until is None:
            if not until_idle or flow_ids is None:
                raise RuntimeError("a drive nested in a running engine needs a condition and named flows")
            store = self.store

            def until() -> bool:
                return all((f := store.get_flow(fid)) is None or not f.is_running for fid in flow_ids)

        condition = until
        if deadline is not None:
            clock = self.clock

            def condition() -> bool:
                return clock.now() >= deadline or until()

        return (None if flow_ids is None else frozenset(flow_ids)), condition, deadline

    async def _stop_left(self) -> int:
        """After run() on a loop that goes on: stop the attempts it left (as a clean stop does)
        and release them."""
        runs = list(self._runs.values())
        self._halt()
        tasks = [r.driver for r in runs if isinstance(r.driver, asyncio.Task) and not r.driver.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            return self._release_interrupted()
        return 0

    def _claim(self, now: float, flow_ids: list[str] | None) -> int:
        """Lease the runnable steps (the caller saw one due) and start their attempts. Returns
        how many runnable steps it read (the scheduler's batch: when full, more may be due)."""
        leased, woken = [], []
        with self.store.tx() as tx:
            timed_out = t.fire_due(tx, now, flow_ids, self.definitions)  # first: a closed flow leases nothing
            runnable = tx.runnable_steps(now, flow_ids, self._scheduler.claim_batch)
            for r in runnable:
                if r.flow_status is not FlowState.RUNNING:
                    continue
                self._offsets[r.step.flow_id] = r.clock_offset
                flow_now = self._now(r.step.flow_id)
                if r.step.status is StepState.WAITING:  # a timer is due: evaluate the wait
                    got_woken = w.wake_step(tx, r.step, self.definitions, flow_now, self._owner)
                    if got_woken is not None:
                        woken.append((r.step.flow_id, got_woken))
                    continue
                found = self.definitions.step_for(r.step.flow_id, r.flow_type, r.flow_ref, r.step.step_type)
                if found is not None:
                    got = t.lease(tx, r, found[0], found[1], self._owner, flow_now)
                    if got is not None:
                        leased.append(got)
        for fired in timed_out:
            if fired.closed is not None:
                self._endings.after_close(fired.flow_id, fired.closed)
        for lease in leased:
            self._start_attempt(lease, self._now(lease.step.flow_id))
        for flow_id, x in woken:
            self._endings.after_woken(flow_id, (x,))
        return len(runnable)

    def _reap(self, now: float, flow_ids: list[str] | None) -> None:
        """Declare lost the attempts of other processes whose deadlines have passed."""
        for step, offset in self.store.read(lambda tx: tx.expired_foreign_attempts(now, self._owner, flow_ids)):
            self._offsets[step.flow_id] = offset
            with self.store.tx() as tx:
                reaped = t.reap(tx, step, self.definitions, self._now(step.flow_id))
            if reaped is not None:
                self._stats["transitions"] += 1
                self._endings.after_failure(step.flow_id, step.step_execution_id, step.step_type, step.attempt,
                                           *reaped)

    # ------------------------------------------------------------------ one attempt ------
    def _start_attempt(self, leased: t.Leased, now: float) -> None:
        loop = asyncio._get_running_loop()
        if loop is None or self._scheduler.stopping():  # run() ends (or ended): given back, never begun
            self._unstarted.append(leased)
            return
        run = self._register(leased, now)
        ctx = self._context.copy() if self._context is not None else contextvars.copy_context()
        run.loop = loop
        if SyncAttempt.fits(run, loop):  # a plain sync execute: callbacks, no task
            run.driver = SyncAttempt(self._sync, run, ctx)
        else:
            task = loop.create_task(self._run_attempt(run), context=ctx)
            task.add_done_callback(lambda done: self._never_began(run, done))
            run.driver = task

    def _register(self, leased: t.Leased, now: float) -> AttemptRun:
        run = AttemptRun(self._attempt_host, leased, self._owner, now)
        with self._runs_lock:
            self._runs[run.key] = run
            self._by_flow.setdefault(run.flow_id, set()).add(run.key)
        self._stats["attempts"] += 1
        return run

    def _successor(self, leased: t.Leased, loop: Any) -> AttemptRun | None:
        """On a handler thread whose commit just leased `leased` here: its attempt, registered
        to run on that thread next (dexcli.engine.sync_attempt), when it is a plain sync execute
        and this process goes on; else None (the loop starts it, or gives it back)."""
        if (leased.spec.handler_kind != "sync" or leased.step.method is not Method.EXECUTE or self._halting
                or self._scheduler.stopping()):
            return None
        run = self._register(leased, self._now(leased.step.flow_id))
        run.loop = loop
        ctx = self._context.copy() if self._context is not None else contextvars.copy_context()
        run.driver = SyncAttempt(self._sync, run, ctx, chained=True)
        return run

    def _tidy(self) -> None:
        if self._deadlines is not None:
            self._deadlines.tidy()

    def _never_began(self, run: AttemptRun, task: asyncio.Task[None]) -> None:
        """A task cancelled before its first step (its flow closed in the same loop pass, or
        the loop stopped) never ran `_run_attempt`: end it here as its `finally` would."""
        if not task.cancelled():
            task.exception()  # a Ctrl-C raised in it went on to stop the drive: seen, not logged
        if not run.began:
            self._interrupted(run)
            self._attempt_ended(run)

    async def _run_attempt(self, run: AttemptRun) -> None:
        run.began = True
        current_flow.set(run.flow_id)  # this task's own context: the host's clock is the flow's
        try:
            self._attempt_started(run)
            await self._attempt(run)
            if run.fenced == STOPPING:  # the handler swallowed the stop's cancellation (wait_for can)
                self._interrupted(run)
        except asyncio.CancelledError:  # fenced (lease lost, flow closed), or this process is stopping
            self._interrupted(run)
        except Exception as exc:  # the outcome could not be recorded (a database error, a bug)
            self._unrecorded(run, exc)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C landed in this attempt's own code: stopping
            self._interrupted(run)
            raise
        finally:
            self._attempt_ended(run)

    def _attempt_started(self, run: AttemptRun) -> None:
        if self.events.listeners:
            self._emit("attemptStarted", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                      attempt=run.attempt, maxAttempts=run.opts.maximum_attempts,
                      heartbeatTimeout=run.opts.heartbeat_timeout)
        self._faults.hit("attempt-start", run.spec.step_type, where=run.where)

    def _interrupted(self, run: AttemptRun) -> None:
        """It was cancelled: fenced (lease lost, flow closed), or this process is stopping (then
        `release_interrupted` gives it back)."""
        if run.fenced in (None, STOPPING):  # not fenced with a reason of its own
            self._stopped.append(run)
        run.fence(STOPPING)

    def _halt(self) -> None:
        self._halting = True
        halt(self._runs.values)

    def _unrecorded(self, run: AttemptRun, exc: Exception) -> None:
        """The outcome could not be recorded (a database error, a bug)."""
        run.fence(f"its outcome could not be recorded: {exc}")
        log.error("%s of flow %s: its outcome could not be recorded; the step stays RUNNING until its "
                  "lease is declared lost", run.where(), run.flow_id, exc_info=exc)
        self._emit("engineError", run.flow_id, stepExecutionId=run.seid, attempt=run.attempt,
                  error=f"{type(exc).__name__}: {exc}")

    def _attempt_ended(self, run: AttemptRun) -> None:
        """It is over here: forget it."""
        with self._runs_lock:  # a chain's thread registers and forgets attempts too
            if self._runs.get(run.key) is run:
                del self._runs[run.key]
                keys = self._by_flow.get(run.flow_id)
                if keys is not None:
                    keys.discard(run.key)
                    if not keys:
                        del self._by_flow[run.flow_id]
        self._scheduler.wake(for_stop_only=run.handed_on)

    def _watch(self, run: AttemptRun) -> None:
        """The attempt's watchdog: a timer at its earliest deadline (no task of its own). A
        heartbeat moves the deadline in memory; the timer then re-arms at the new one."""
        run.timer = None
        if run.loop is None or run.done() or run.fenced:
            return
        deadline, kind = run.next_deadline()  # on the flow's clock
        loop = run.loop
        ahead = self._now(run.flow_id) - loop.time()  # the flow's clock against the loop's
        if loop.time() + ahead >= deadline:
            run.timed_out = (deadline, kind)
            run.fence(f"{kind} timeout")
            run.cancel()
        else:
            run.timer = self._arm_at(run, deadline - ahead)

    def _arm_at(self, run: AttemptRun, when: float) -> Any:
        deadlines = self._deadlines
        if deadlines is not None and deadlines.loop is run.loop:
            return deadlines.arm(when, run)
        assert run.loop is not None
        return run.loop.call_at(when, self._watch, run)

    def _runs_of(self, flow_id: str) -> list[AttemptRun]:
        """The attempts of a flow running here."""
        with self._runs_lock:
            keys = list(self._by_flow.get(flow_id, ()))
        return [run for key in keys if (run := self._runs.get(key)) is not None]

    def _rearm(self, flow_id: str) -> None:
        """The flow's clock moved (`dex time skip`): re-arm its attempts' watchdogs."""
        for run in self._runs_of(flow_id):
            if run.timer is not None:
                run.disarm()
                self._watch(run)

    def _arm(self, run: AttemptRun) -> Any:
        """Start its watchdog; returns its input. An input that does not decode as the step's
        type raises ValueMappingError: that attempt's failure, as a worker's decode failure is."""
        loop = run.loop
        assert loop is not None
        run.timer = self._arm_at(run, run.next_deadline()[0] - (self._now(run.flow_id) - loop.time()))
        return step_input(run)

    async def _attempt(self, run: AttemptRun) -> None:
        error: BaseException | None = None
        result: Any = None
        try:
            result = await invoke(run, self._arm(run))
        except asyncio.CancelledError:
            if run.timed_out is None:
                raise
        except (Exception, AttemptFencedError) as exc:  # judged below, once the watchdog is off
            error = exc
        finally:
            run.disarm()
        unit = self._endings.unit(run, judge(run, result, error, self.definitions, self._now(run.flow_id)))
        if unit is not None:
            await self._endings.commit(run, unit)

    # ------------------------------------------------------------------ stopping ---------
    def release(self) -> int:
        """Release what a drive left once its loop has closed (`drive(release=False)` leaves it
        to the caller): as the drive's own release does (below), and whatever else is still
        leased to this engine's owner. When that cannot be recorded (the database refuses
        writes), the owner is marked stopped beside the database instead, and the next drive
        releases its attempts at once (`Store.record_stopped`). Returns how many ended
        INTERRUPTED here."""
        if self.store.failure is None:  # else the database refuses writes: do not wait on it again
            try:
                return self._release_interrupted() + self._scheduler.release_left()
            except Exception:
                pass
        if not isinstance(self.store.failure, DatabaseReplacedError):  # (a mark beside a new file would be wrong)
            self.store.record_stopped(self._owner)
        return 0

    def _release_interrupted(self) -> int:
        """After run() was interrupted (Ctrl-C, SIGTERM, a closed output): end the attempts it
        was running as INTERRUPTED and make their steps runnable at once, so a resume need not
        wait for their heartbeat deadlines. Leases of attempts that never began (leased at start
        for a run() that never came, or stopped before their first step) are given back instead:
        nothing of them is recorded. Returns how many ended INTERRUPTED."""
        self._scheduler.orphans()
        stopped, self._stopped = self._stopped, []
        unstarted, self._unstarted = self._unstarted, []
        self._scheduler.release_held()
        if not stopped and not unstarted:
            return 0
        with self.store.tx() as tx:
            for leased in unstarted:
                step = leased.step
                t.give_back(tx, t.AttemptKey(step.flow_id, step.step_execution_id, step.attempt,
                                             step.lease_owner or ""), self._now(step.flow_id))
            for run in stopped:
                if not run.began:
                    t.give_back(tx, run.attempt_key, self._now(run.flow_id))
            return sum(t.release(tx, run.attempt_key, self._now(run.flow_id)) for run in stopped if run.began)

    @overload
    def change(self, op: TimeTravelRequest | ContinueAsNew) -> str: ...
    @overload
    def change(self, op: StopFlow | SkipTimer | UpdateFlowConfig) -> None: ...
    @overload
    def change(self, op: TimeSkip) -> Skipped: ...
    def change(self, op: Change) -> str | Skipped | None:
        """An operator's change to one flow (dexcli.engine.changes), run on the engine's loop
        (from another thread while a drive goes on): a stop; a skipped timer; a FlowConfig
        update; a time travel or a continue-as-new, which return the new run id. A time skip of
        some flows' clocks is one store transaction from any thread and returns what moved (a
        process driving a moved flow follows within half a second)."""
        if isinstance(op, TimeSkip):
            return self.store.skip_flows(None if op.flow_ids is None else list(op.flow_ids), op.seconds)
        if isinstance(op, StopFlow):
            self._stop_flow(op.flow_id, op.stop_type, op.reason)
            return None
        if isinstance(op, SkipTimer):
            self._skip_timer(op.flow_id, op.step_execution_id, op.condition_id, op.condition_index)
            return None
        if isinstance(op, UpdateFlowConfig):
            self._update_flow_config(op.flow_id, op.fields)
            return None
        if isinstance(op, ContinueAsNew):
            return self._continue_as_new(op.flow_id, op.reason, op.run_id)
        return self._time_travel(op)

    def _stop_flow(self, flow_id: str, stop_type: str, reason: str | None) -> None:
        def stop() -> None:
            with self.store.tx() as tx:
                closed = t.stop(tx, flow_id, stop_type, reason, self._now(flow_id))
            self._endings.after_close(flow_id, closed)
            self._wake()

        self._drives.on_loop(stop)

    def _time_travel(self, req: TimeTravelRequest) -> str:
        """A new run of the flow from a point of its history (transitions.time_travel); the old
        run, if it still ran, is terminated and its attempts here fenced. Returns the new run id."""
        check_request(req)  # ValueError before anything runs, as the official Client checks

        def travel() -> str:
            with self.store.tx() as tx:
                done = time_travel(tx, req, self._fresh_now(req.flow_id), self.definitions)
            if done.terminated is not None:
                self._endings.after_close(req.flow_id, done.terminated)
            self._scheduler.adopt(req.flow_id)
            self._scheduler.closed(req.flow_id, reopened=True)
            self._emit("flowTimeTravelled", req.flow_id, runId=done.run_id, previousRunId=done.previous_run_id,
                      requeued=list(done.requeued))
            self._wake()
            return done.run_id

        return self._drives.on_loop(travel)

    def _skip_timer(self, flow_id: str, step_execution_id: str, condition_id: str | None,
                    condition_index: int | None) -> None:
        """Make a pending timer of a waiting step execution ready now."""
        def skip() -> None:
            with self.store.tx() as tx:
                woken = w.skip_timer(tx, flow_id, step_execution_id, condition_id, condition_index,
                                     self.definitions, self._fresh_now(flow_id), None)
            self._endings.after_woken(flow_id, (woken,) if woken else ())
            self._wake()

        self._drives.on_loop(skip)

    def _update_flow_config(self, flow_id: str, fields: dict[str, Any]) -> None:
        """Merge FlowConfig fields (dexcli.engine.flow_config, already checked) into a running
        flow's: the methods leased from now on, and the next threshold check, read it."""
        self._check_store_names(fields)

        def update() -> None:
            with self.store.tx() as tx:
                t.continuing.update_config(tx, flow_id, fields, self._fresh_now(flow_id))

        self._drives.on_loop(update)

    def _continue_as_new(self, flow_id: str, reason: str, run_id: str | None) -> str:
        """Roll a running flow over into a new run now (transitions/continuing.py); the new
        run's id."""
        def roll() -> str:
            with self.store.tx() as tx:
                done = t.continuing.continue_as_new(tx, flow_id, self._fresh_now(flow_id), reason, run_id)
            self._emit("flowContinuedAsNew", flow_id, runId=done.run_id, previousRunId=done.previous_run_id,
                      reason=done.reason)
            self._wake()
            return done.run_id

        return self._drives.on_loop(roll)

    # ------------------------------------------------------------------ rpc, time ---------
    def invoke_rpc(self, method: Any, flow_id: str, input: Any = None, options: RPCInvokeOptions | None = None
                   ) -> Any:
        """Invoke an RPC on a flow from outside the engine's loop (a Client, `dex rpc`, a step's
        client): `method` is a bound @rpc method of a registered flow, or an RPC's name (of the
        flow's own type). Runs the handler here, commits its effects; returns its output."""
        definition, spec = self._rpc_target(method, flow_id)
        return rpc.invoke(self.store, self.definitions, self.clock, self._fresh_now,
                          lambda applied: self._drives.on_loop(lambda: self._after_rpc(flow_id, spec, applied)),
                          definition, spec, flow_id, input, options)

    async def invoke_rpc_async(self, method: Any, flow_id: str, input: Any = None,
                               options: RPCInvokeOptions | None = None) -> Any:
        """`invoke_rpc` for code on the engine's loop: the commit joins the group commit."""
        definition, spec = self._rpc_target(method, flow_id)
        return await rpc.invoke_async(self.store, self.definitions, self.clock, self._fresh_now, self._commits.submit,
                                      lambda applied: self._after_rpc(flow_id, spec, applied),
                                      definition, spec, flow_id, input, options)

    def _rpc_target(self, method: Any, flow_id: str) -> tuple[FlowDefinition, RpcSpec]:
        if not isinstance(method, str):
            return rpc.resolve(self.definitions, method)
        row = self.store.get_flow(flow_id)
        if row is None:
            raise FlowNotActiveOrNotFoundError(f"flow {flow_id} not found")
        definition = self.definitions.get(row.flow_type, row.flow_ref)
        spec = definition.rpcs.get(method)
        if spec is None:
            raise FlowDefinitionError(f"Flow {definition.flow_type} RPC is not registered: {method}")
        return definition, spec

    def _after_rpc(self, flow_id: str, spec: RpcSpec, applied: t.RpcApplied) -> None:
        """After an RPC's COMMIT: report, stop cancelled attempts running here, look again."""
        self._emit("rpcCompleted", flow_id, rpcName=spec.name, nextSteps=list(applied.started),
                  canceled=list(applied.canceled))
        self._endings.fence_steps(flow_id, applied.canceled, f"cancelled by RPC {spec.name}")
        self._endings.after_woken(flow_id, applied.woken)
        self._wake()

    def activity(self, *, running: bool = True) -> Activity:
        """A frozen snapshot of what this engine did (attempts started, verdicts committed,
        flows closed) and of the attempts leased to this process that it runs now (from any
        thread; dexcli.engine.activity). Read-only: the bench's counters, the tests' checks.
        `running=False` leaves the attempts out (empty): the counters alone, no lock taken."""
        runs: list[AttemptRun] = []
        if running:
            with self._runs_lock:
                runs = list(self._runs.values())
        stats = self._stats
        return Activity(stats["attempts"], stats["transitions"], stats["flows_closed"], tuple(
            AttemptHere(r.flow_id, r.seid, r.attempt,
                        None if r.driver is None else isinstance(r.driver, SyncAttempt), r.began)
            for r in runs))
