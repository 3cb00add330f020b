"""Attempts' deadlines, armed from any thread, watched by the loop.

A handler thread that runs a chain of sync steps (dexcli.engine.sync_attempt) arms each new
attempt's watchdog itself, without a hop to the loop: the deadline goes on a heap, and the
loop keeps one timer at the earliest. Arming a deadline later than that timer (the usual
case: the next step's deadline is after its predecessor's) wakes nobody; an earlier one
wakes the loop to move its timer. When the timer fires, each due entry is handed to `fire`
(the engine's watchdog: it times the attempt out, or re-arms at its next deadline).

An entry is cancelled by a flag (from any thread). On an auto-advancing clock (`eager`) the
loop drops cancelled entries from the top whenever it looks (`tidy`), so its timer never stays
on a dead deadline once a chain has handed back to it: the clock jumps only to live deadlines.
On a real clock a timer left on a dead deadline just fires once for nothing and moves on,
which is cheaper than moving it each time an attempt ends; once cancelled entries are more
than half of the heap (and over `COMPACT_AT`), the next arm drops them all, so the heap holds
about the attempts running, not every attempt of the last heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
from collections.abc import Callable
from typing import Any

COMPACT_AT = 1024  # cancelled entries before the heap is compacted (once they are half of it, too)


class Entry:
    """One armed deadline; `cancel` (any thread) takes it off."""

    __slots__ = ("when", "target", "dead", "_watch")

    def __init__(self, when: float, target: Any, watch: Watch) -> None:
        self.when = when
        self.target = target
        self.dead = False
        self._watch = watch

    def cancel(self) -> None:
        if self.dead:
            return
        self.dead = True
        self.target = None
        watch = self._watch
        watch._cancelled += 1  # (unlocked: a hint for compacting, recounted when it compacts)
        if threading.get_ident() == watch._thread:  # on the loop: its timer moves now if it was this
            watch.tidy()


class Watch:
    def __init__(self, loop: asyncio.AbstractEventLoop, fire: Callable[[Any], None], *, eager: bool = True) -> None:
        self.loop = self._loop = loop
        self._eager = eager
        self._fire_one = fire
        self._thread = threading.get_ident()  # the loop's (a Watch is made on its loop)
        self._heap: list[tuple[float, int, Entry]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._armed = float("inf")  # when the loop's timer fires (or is about to be set for)
        self._cancelled = 0  # entries cancelled since the heap was last compacted (about)

    def arm(self, when: float, target: Any) -> Entry:
        """Watch `target` until `when` (loop time); any thread."""
        entry = Entry(when, target, self)
        with self._lock:
            if self._cancelled > COMPACT_AT and 2 * self._cancelled > len(self._heap):
                self._compact()
            heapq.heappush(self._heap, (when, next(self._seq), entry))
            earlier = when < self._armed
            if earlier:
                self._armed = when
        if earlier:
            if threading.get_ident() == self._thread:
                self._rearm()
            elif not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._rearm)
        return entry

    def __len__(self) -> int:
        """Entries on the heap, cancelled ones not yet dropped included."""
        return len(self._heap)

    def _compact(self) -> None:
        """(Under the lock.) Drop every cancelled entry. On a real clock a cancelled entry is
        otherwise dropped only when its deadline comes to the top: with a long heartbeat timeout
        and short steps, a busy worker's heap would hold every attempt of the last hour."""
        self._heap = [item for item in self._heap if not item[2].dead]
        heapq.heapify(self._heap)
        self._cancelled = 0

    def tidy(self) -> None:
        """On the loop: if the earliest entry was cancelled, move the timer to a live one."""
        heap = self._heap
        if self._eager and heap and heap[0][2].dead:
            self._rearm()

    def _rearm(self) -> None:
        with self._lock:
            heap = self._heap
            while heap and heap[0][2].dead:
                heapq.heappop(heap)
            when = heap[0][0] if heap else None
            self._armed = when if when is not None else float("inf")
        if self._timer is not None:
            if when is not None and self._timer.when() == when:
                return
            self._timer.cancel()
            self._timer = None
        if when is not None and not self._loop.is_closed():
            self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        now = self._loop.time()
        due: list[Entry] = []
        with self._lock:
            heap = self._heap
            while heap and (heap[0][2].dead or heap[0][0] <= now):
                entry = heapq.heappop(heap)[2]
                if not entry.dead:
                    due.append(entry)
            self._armed = float("inf")
        for entry in due:
            target = entry.target
            entry.dead, entry.target = True, None
            if target is not None:
                self._fire_one(target)
        self._rearm()
