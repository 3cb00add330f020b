"""The engine's loop: when to look at the database, what to claim or reap, when to sleep.

Each pass reads one schedule (the earliest queued step or retry; the deadlines of attempts
other processes hold), reaps what has expired, claims what is due, and then sleeps until the
next of those times or until something wakes it (an attempt ended, a flow started here).

Each flow has its own clock: real time plus its offset (`flows.clock_offset`, what time
skipping added), and its stored times are on that clock. The schedule is read in real time
(the store subtracts each flow's offset), so one process's skip never makes another flow due.
When this engine's time-skip clock jumps, the flows it drives are skipped by the same amount;
a process driving one flow keeps its clock equal to that flow's, `dex time skip` included.

A start made outside run() may lease its first attempt to the next run() (`reserve`, `hold`:
`Engine.start_flow(lease=True)`, what `dex run` does). That run() takes the owner the lease was
made for and starts the attempt at once, without a claim; when it drives only such new flows,
its first pass reads nothing either (a new flow has offset 0, nothing queued, no other owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dexcli.engine.clock import Clock, real_pause
from dexcli.engine.deadlines import iso
from dexcli.engine.definitions import Definitions, cannot_run
from dexcli.engine.drives import DriveEndedError, Waiter
from dexcli.engine.events import Emitter
from dexcli.engine.transitions import AttemptKey, Leased, give_back, release_left
from dexcli.store import FlowRecord, Schedule, StepRecord, Store
from dexcli.store.owners import owner_alive, owner_holds

REAL_POLL_SECONDS = 0.5  # how often a real-time engine looks for other processes' changes
CLAIM_BATCH = 500
ANNOUNCED = 20  # attempts and retries an idleWait event names at most


@dataclass(frozen=True, slots=True)
class SchedulerHooks:
    """What the loop needs of the engine it runs: collaborators and callbacks."""

    store: Store
    clock: Clock
    definitions: Definitions
    events: Emitter
    offsets: dict[str, float]  # flow id -> its clock offset, where not 0 (shared with the engine)
    runs: dict[tuple[str, str], Any]  # the attempts running here (the engine's)
    now: Callable[[str], float]
    claim: Callable[[float, list[str] | None], int]  # lease what is due and start it; how many it read
    reap: Callable[[float, list[str] | None], None]  # declare other processes' expired attempts lost
    rearm: Callable[[str], None]  # a flow's clock moved: its attempts' watchdogs re-arm
    start_attempt: Callable[[Leased, float], None]
    project: Callable[[], None]  # write the Attribute Store projections left (and arm their retries)


@dataclass(frozen=True, slots=True)
class Held:
    """A start's first attempt, leased in the start's transaction for the next run()."""

    leased: Leased
    timed: bool  # the flow has a timeout: the first pass must read when it fires

    @property
    def key(self) -> AttemptKey:
        step = self.leased.step
        return AttemptKey(step.flow_id, step.step_execution_id, step.attempt, step.lease_owner or "")


class Scheduler:
    claim_batch = CLAIM_BATCH

    def __init__(self, hooks: SchedulerHooks, owner_base: str) -> None:
        self.h = hooks
        self._owner_base = owner_base
        self.owner = self._new_owner()
        self._driving: set[str] | None = None  # the flows run() drives (None: not running); its own set
        self._all = False  # run() drives every flow in the database (a worker)
        self._waiter: asyncio.Future[None] | None = None  # what _sleep awaits; wake() resolves it
        self._has_stop = False  # run() was given a stop condition (checked on every change)
        self._next_offset_read = 0.0  # real monotonic time of the next look at the flows' offsets
        self._ids: list[str] | None = None  # the flows looked at this pass (None: all)
        self._reserved: str | None = None  # the owner the next run() takes (a start leased to it)
        self._held: dict[str, Held] = {}  # flow id -> its first attempt, leased for the next run()
        self._closed: set[str] = set()  # flows run() drives that closed here during it
        self._stop: Callable[[], bool] | None = None  # run()'s stop condition
        self._waiters: list[Waiter] = []  # drives asked for while run() goes on (dexcli.engine.drives)
        self._orphans: list[Waiter] = []  # those of attempts still waiting when run() ended
        self._next_stopped_look = 0.0  # real monotonic time of the next look for stopped owners' marks
        self._announced: object = None  # what the last idleWait event said
        self._loop: asyncio.AbstractEventLoop | None = None  # run()'s, and its thread
        self._thread = 0
        self._full = True  # a wake since the last pass that may have made something due
        self._hop = False  # a wake from another thread is on its way to the loop

    def _new_owner(self) -> str:
        return f"{self._owner_base}:{os.urandom(3).hex()}"  # six random hex digits (a uuid4 costs ~6x more)

    def wake(self, *, for_stop_only: bool = False) -> None:
        """Make the loop pass again now. `for_stop_only`: the change cannot make anything due or
        the drive idle (an attempt handed its flow on to a successor leased in the same commit),
        so only a stop condition could care."""
        if for_stop_only and not self._has_stop and not self._waiters:
            return
        if not for_stop_only:
            self._full = True
        if threading.get_ident() != self._thread:  # a handler thread's chain (sync_attempt)
            loop = self._loop
            if loop is not None and not self._hop:
                self._hop = True
                with contextlib.suppress(RuntimeError):  # the loop has closed: nobody sleeps on it
                    loop.call_soon_threadsafe(self._hopped)
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _hopped(self) -> None:
        self._hop = False
        self.wake(for_stop_only=True)

    def reserve(self) -> str | None:
        """The owner a start made outside run() leases its first attempt to: the one the next
        run() takes (None while run() is going on: such a start leases nothing)."""
        if self._driving is not None:
            return None
        if self._reserved is None:  # attempts still in memory keep the current owner (see loop)
            self._reserved = self.owner if self.h.runs else self._new_owner()
        return self._reserved

    def hold(self, leased: Leased, timed: bool) -> None:
        """A start leased its first attempt to the next run(), which starts it."""
        self._held[leased.step.flow_id] = Held(leased, timed)

    def release_held(self) -> None:
        """Give back the leases held for a run() that will not come (the process stops): their
        attempts never began, so each step is runnable at once as if never leased."""
        held, self._held = list(self._held.values()), {}
        if held:
            h = self.h
            with h.store.tx() as tx:
                for x in held:
                    give_back(tx, x.key, h.now(x.key.flow_id))

    def release_left(self) -> int:
        """Once the loop that ran this engine's attempts has closed (the process stops): release
        whatever is still leased to its owner — nothing here can run it any more, and left
        leased it would wait for its heartbeat deadline. Returns how many ended INTERRUPTED."""
        with self.h.store.tx() as tx:
            return release_left(tx, self.owner, self.h.clock.real())

    def closed(self, flow_id: str, *, reopened: bool = False, failed: bool = False) -> FlowRecord | None:
        """A flow closed in this process (its close committed here); `reopened`: a new run of
        it started here (after id reuse), so it has work again. `failed`: it closed FAILED, and
        may have a flow retry's new run (transitions/flow_retry), which is returned then."""
        retried = self.h.store.get_flow(flow_id) if failed else None
        if retried is not None and not retried.is_running:
            retried = None
        if reopened or retried is not None:
            self._closed.discard(flow_id)
        elif self._driving is not None and flow_id in self._driving:
            self._closed.add(flow_id)
        return retried

    def adopt(self, flow_id: str) -> None:
        """A flow started while run() goes on (by a step, through a client): run() drives it too."""
        if self._driving is not None and not self._all:
            self._driving.add(flow_id)  # in place: a copy per start was O(n²) over n starts

    def stopping(self) -> bool:
        """Whether run() ends at its next pass (its stop condition holds and no caller from
        outside its attempts waits on it): an attempt leased now is not begun, but given back."""
        stop = self._stop
        return stop is not None and stop() and not any(w.outside for w in self._waiters)

    def accept(self, waiter: Waiter) -> None:
        """A drive asked for while run() goes on (on the loop): its flows join the scope, its
        condition is checked on every change until it holds."""
        if self._driving is None:
            waiter.finish(DriveEndedError("the engine's drive ended"))
            return
        if waiter.until():
            waiter.finish(None)
            return
        if waiter.flow_ids is None:
            self._all = True
        elif not self._all:
            self._driving |= waiter.flow_ids
        if waiter.holds_thread:
            self._thread_waits(True)
        loop = asyncio.get_running_loop()
        if waiter.deadline is not None:
            loop.call_at(waiter.deadline, self.wake)
        self._waiters.append(waiter)
        self.wake()

    def _thread_waits(self, waiting: bool) -> None:
        """A handler thread blocks in a nested drive: it does not hold the clock meanwhile."""
        thread_waits = getattr(asyncio.get_running_loop(), "thread_waits", None)
        if thread_waits is not None:
            thread_waits(waiting)

    def _tell(self, waiter: Waiter, error: BaseException | None) -> None:
        if waiter.holds_thread:
            self._thread_waits(False)
        waiter.finish(error)

    def _check_waiters(self) -> None:
        if self._waiters:
            held = [w for w in self._waiters if w.until()]
            if held:
                self._waiters = [w for w in self._waiters if w not in held]
                for w in held:
                    self._tell(w, None)

    def orphans(self) -> None:
        """After run()'s attempts were stopped: tell the nested drives they waited in that the
        drive ended (their handlers' threads go on, their answers ignored)."""
        orphans, self._orphans = self._orphans, []
        for w in orphans:
            w.finish(DriveEndedError("the engine's drive ended before the condition held"))

    def _outside_waiting(self) -> bool:
        return any(w.outside for w in self._waiters)

    @property
    def running(self) -> bool:
        """Whether run() is going on."""
        return self._driving is not None

    def drives(self, flow_id: str) -> bool:
        """Whether run() is driving this flow now (so this process may lease its next steps)."""
        return self._all or (self._driving is not None and flow_id in self._driving)

    def _scope(self, flow_ids: list[str] | None) -> list[str] | None:
        """The flows to look at this pass: those asked for, less the ones whose code cannot be
        loaded here (None: every flow)."""
        unloadable = self.h.definitions.unloadable
        if flow_ids is None and not unloadable:
            return None
        if flow_ids is None:
            return [f for f in self.h.store.running_flow_ids() if f not in unloadable]
        return [f for f in flow_ids if f not in unloadable]

    async def loop(self, flow_ids: list[str] | None, until_idle: bool, stop: Callable[[], bool] | None,
                   stop_poll: float | None) -> None:
        h = self.h
        reserved, self._reserved = self._reserved, None
        if not h.runs:
            self.owner = reserved or self._new_owner()
        self._all, self._driving = flow_ids is None, set(flow_ids or ())
        # a parent's running SubFlows are driven with it; a flow whose start leased its first
        # attempt to this run has none (its start step has not run, and its id was new: a start
        # after id reuse leases nothing), so a drive of only such flows reads nothing here
        parents = [f for f in flow_ids or () if f not in self._held]
        if parents:
            self._driving.update(h.store.running_descendants(parents))
        self._has_stop = stop is not None
        self._stop = stop
        self._next_offset_read = 0.0
        self._closed = set()
        self._announced = None
        clock = h.clock
        if clock.follow_real and clock.auto_advance:
            clock.on_advance = self._skipped
        self._loop, self._thread, self._full = asyncio.get_running_loop(), threading.get_ident(), True
        last: Schedule | None = None
        try:
            self._release_stopped()
            h.project()  # projections left to write, and their retries' timers
            if flow_ids is not None:
                self.find_unloadable(flow_ids)
            first = self._start_held(flow_ids)
            while True:
                driving = None if self._all else sorted(self._driving)
                if (until_idle and not h.runs and driving and self._closed.issuperset(driving)
                        and not self._outside_waiting()):
                    break  # they closed here: nothing of them can be queued or running any more
                ids = self._ids = self._scope(driving)
                if driving is not None and not ids and h.definitions.unloadable:
                    fid = next(iter(h.definitions.unloadable))
                    raise cannot_run(fid, h.definitions.unloadable[fid])
                if first is not None:
                    sched = first
                elif not self._full and last is not None:
                    sched = last  # woken only for a stop condition (a step handed on): nothing new is due
                else:
                    sched = self._pass(ids)
                first, last, self._full = None, sched, False
                self._check_waiters()
                if stop is not None and stop() and not self._outside_waiting():
                    break
                if (until_idle and not h.runs and not sched.foreign and self._idle(sched, ids)
                        and not self._outside_waiting()):
                    break  # nothing of these flows runs again unless a timer fires or someone acts
                if until_idle and not h.runs:
                    self._announce(sched, ids)
                timeout = await self._timeout(sched, stop is not None, stop_poll)
                if timeout is not None and timeout < 0:
                    self._full = True
                    continue
                await self._sleep(timeout)
        finally:
            self._all, self._driving, self._stop = False, None, None
            self._loop, self._thread = None, 0
            waiters, self._waiters = self._waiters, []
            for w in waiters:
                if w.outside:  # they drive again themselves
                    self._tell(w, DriveEndedError("the engine's drive ended before the condition held"))
                else:  # attempts of this loop: told once they are stopped (`orphans`), so their
                    self._orphans.append(w)  # handlers' answers cannot be taken as outcomes
            if clock.on_advance == self._skipped:
                clock.on_advance = None

    def find_unloadable(self, flow_ids: list[str]) -> None:
        """Before the first pass: note the named flows an open step of which this process cannot
        run (its class is gone, the flow's code does not load). A drive refused for them then
        refuses before it changes anything: no skip of their clocks, no timer of theirs fired.
        Starts leased to this run were just made from a loaded definition: not read again."""
        h = self.h
        for fid in flow_ids:
            flow = None if fid in self._held or fid in h.definitions.unloadable else h.store.get_flow(fid)
            if flow is None or not flow.is_running:
                continue
            for step in h.store.steps_of(fid):
                if step.status.is_open and h.definitions.step_for(
                        fid, flow.flow_type, flow.flow_ref, step.step_type) is None:
                    break

    def _release_stopped(self) -> None:
        """A process that stopped when it could not write (the disk was full) left a mark for
        the leases it meant to release (`Store.record_stopped`): release them now, at once,
        as it would have — not at their heartbeat deadlines, as a crash's."""
        clock = self.h.clock
        if clock.real_monotonic() < self._next_stopped_look:  # a directory read: not on every run()
            return
        self._next_stopped_look = clock.real_monotonic() + REAL_POLL_SECONDS
        store = self.h.store
        for owner in store.stopped_owners():
            if owner_alive(owner):
                continue  # still on its way out
            with store.tx() as tx:
                release_left(tx, owner, self.h.clock.real())
            store.forget_stopped(owner)

    def _start_held(self, flow_ids: list[str] | None) -> Schedule | None:
        """Start the attempts starts leased to this run() (no claim); give back those of flows
        it does not drive. Returns the first pass's schedule when it would read only about these
        new flows (their offset is 0, nothing else of them is queued, no other process holds
        them), so the pass is skipped; None: pass as usual."""
        if not self._held:
            return None
        h, clock = self.h, self.h.clock
        mine = {f: x for f, x in self._held.items() if self.drives(f) and x.leased.step.lease_owner == self.owner}
        for f in mine:
            del self._held[f]
        if self._held:
            self.release_held()
        for f, x in mine.items():
            h.offsets.pop(f, None)
            h.start_attempt(x.leased, x.leased.step.attempt_started_at or h.now(f))
        if (flow_ids is None or set(flow_ids) != set(mine) or h.definitions.unloadable
                or any(x.timed for x in mine.values())):
            return None
        self._next_offset_read = clock.real_monotonic() + REAL_POLL_SECONDS
        if len(mine) == 1 and clock.follow_real:
            clock.set_offset(0.0)
        return Schedule(None, ())

    def _idle(self, sched: Schedule, ids: list[str] | None) -> bool:
        """Nothing queued, retrying or running (those checked by the caller) — only timers ahead:
        a real-time drive `until_idle` does not wait for a Wait's timer, a start delay or a flow
        timeout (hours, maybe); a skipping clock jumps to them instead, so is idle only when
        nothing at all is ahead."""
        if sched.due is None:
            return True
        clock = self.h.clock
        if clock.auto_advance or sched.due <= clock.real():
            return False
        return not self.h.store.read(lambda tx: tx.retrying_steps(ids, 1))

    def _announce(self, sched: Schedule, ids: list[str] | None) -> None:
        """With nothing of its own running, a drive `until_idle` says what it still waits for, once
        per change (an `idleWait` event): attempts of processes that are gone, until their
        deadlines declare them lost; attempts live processes hold; retries backing off. A
        skipping clock jumps over all but the live ones: then only those are said."""
        h, clock = self.h, self.h.clock
        if (sched.due is None and not sched.foreign) or (clock.auto_advance and not (clock.follow_real and
                                                                                     sched.foreign)):
            return  # nothing ahead, or a clock that jumps over it all with no other process around
        running = h.store.read(lambda tx: tx.expired_foreign_attempts(math.inf, self.owner, ids))
        retries = h.store.read(lambda tx: tx.retrying_steps(ids, ANNOUNCED))
        lost, held = [], []
        for step, offset in running[:ANNOUNCED]:
            entry = {"flowId": step.flow_id, "stepExecutionId": step.step_execution_id, "attempt": step.attempt}
            owner = step.lease_owner or ""
            if not owner or owner_alive(owner) is False or owner.startswith(self._owner_base + ":"):
                lost.append({**entry, "at": iso(_first_deadline(step) - offset)})
            else:
                held.append({**entry, "owner": owner})
        if clock.auto_advance and not held:
            return
        now = clock.real()
        retries = [(s, offset) for s, offset in retries if (s.next_attempt_at or 0.0) - offset > now]
        owners = sorted({str(e["owner"]) for e in held})
        # live processes' attempts change all the time: say them again only when the owners do
        key = (tuple((e["stepExecutionId"], e["attempt"]) for e in lost), tuple(owners),
               tuple((s.step_execution_id, s.attempt) for s, _ in retries))
        if key == self._announced:
            return
        self._announced = key
        h.events.emit("idleWait", "", lost=lost, held=held, skippable=not clock.auto_advance,
                    retries=[{"flowId": s.flow_id, "stepExecutionId": s.step_execution_id, "attempt": s.attempt + 1,
                              "at": iso((s.next_attempt_at or 0.0) - offset)} for s, offset in retries])

    def _skipped(self, seconds: float) -> None:
        """This engine's clock jumped: so do the clocks of the flows it drives."""
        self.h.offsets.update(self.h.store.skip_flows(self._ids, seconds, self._owner_base).moved)

    def _read_offsets(self, ids: list[str] | None) -> None:
        """Adopt the flows' offsets (`dex time skip` moves them): a process driving one flow
        moves its own clock with it; the attempts of a flow whose clock moved re-arm."""
        h, clock = self.h, self.h.clock
        self._next_offset_read = clock.real_monotonic() + REAL_POLL_SECONDS
        fresh = h.store.flow_offsets(ids)
        changed = {f for f in set(fresh) | {f for f in h.offsets if ids is None or f in ids}
                   if fresh.get(f, 0.0) != h.offsets.get(f, 0.0)}
        for f in changed:
            h.offsets[f] = fresh.get(f, 0.0)
        if ids is not None and len(ids) == 1 and clock.follow_real:
            clock.set_offset(h.offsets.get(ids[0], 0.0))
        for f in changed:
            h.rearm(f)

    def _pass(self, ids: list[str] | None) -> Schedule:
        """Read the schedule; reap and claim what is due. Returns the schedule after that."""
        h, clock = self.h, self.h.clock
        if clock.real_monotonic() >= self._next_offset_read:
            self._read_offsets(ids)
        now = clock.real()
        sched = h.store.schedule(ids, self.owner)  # one read per pass
        if any(t is not None and t <= now for _, t in sched.foreign):
            h.reap(now, ids)
            sched = h.store.schedule(ids, self.owner)
        if sched.due is not None and sched.due <= now:
            if h.claim(now, ids) >= self.claim_batch:
                return sched  # a full batch: more is due now, the next pass (at once) reads again
            sched = h.store.schedule(ids, self.owner)
        return sched

    async def _timeout(self, sched: Schedule, has_stop: bool, stop_poll: float | None) -> float | None:
        """How long to sleep: None for until woken; a negative value means look again now."""
        clock = self.h.clock
        wake_at, live_foreign = self._next_wake(sched)
        timeout = None if wake_at is None else max(0.0, wake_at - clock.real())
        if clock.follow_real and not clock.auto_advance:
            timeout = REAL_POLL_SECONDS if timeout is None else min(timeout, REAL_POLL_SECONDS)
        elif clock.auto_advance and clock.follow_real and not self.h.runs and (
                timeout is None or live_foreign):
            # Skipping time with nothing of ours running: another live process may hold work
            # (never jump the shared clock over its lease), or, with nothing due at all, new
            # work may be started by another process. Look again after a real pause; a busy
            # thread keeps the clock from jumping meanwhile. With only queued work, retries or
            # dead processes' deadlines ahead, the loop's sleep jumps the clock to the first.
            if timeout is None or timeout > 0:
                await real_pause(min(REAL_POLL_SECONDS, timeout or REAL_POLL_SECONDS))
            return -1.0
        if has_stop and stop_poll is not None:
            timeout = stop_poll if timeout is None else min(timeout, stop_poll)
        return timeout

    async def _sleep(self, timeout: float | None) -> None:
        """Until wake() or the timeout (a future and a timer: no task per sleep)."""
        loop = asyncio.get_running_loop()
        if timeout is not None and timeout <= 0:
            self._full = True
            await asyncio.sleep(0)
        else:
            waiter = self._waiter = loop.create_future()
            timer = None if timeout is None else loop.call_at(loop.time() + timeout, self._timed_out, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError()  # a cancel that landed as the wake fired: honour it

    def _timed_out(self, waiter: asyncio.Future[None]) -> None:
        self._full = True  # time passed: something may be due
        _resolve(waiter)

    def _next_wake(self, sched: Schedule) -> tuple[float | None, bool]:
        """When something is next due, and whether a live process holds a lease here.

        A lease held by a live process is not a deadline to skip to: its owner heartbeats in
        real time (`dex resume ID --time-skip` of a flow another `dex run` drives waits for it,
        it does not take the flow over). A dead or stopped owner's deadline is (that is how a
        crashed or stuck attempt gets declared lost): see dexcli.store.owners.
        """
        times = [sched.due] if sched.due is not None else []
        live = False
        clock = self.h.clock
        respect_live = clock.auto_advance and clock.follow_real
        alive: dict[str, bool] = {}
        for owner, t in sched.foreign:
            owner = owner or ""
            ours = owner.startswith(self._owner_base + ":")  # an earlier session of this engine
            if respect_live and not ours:
                if owner not in alive:
                    alive[owner] = owner_holds(owner)
                if alive[owner]:
                    live = True
                    continue
            if t is not None:
                times.append(t)
        return (min(times) if times else None), live


def _first_deadline(step: StepRecord) -> float:
    return min(t for t in (step.heartbeat_deadline, step.attempt_deadline, step.total_deadline) if t is not None)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
