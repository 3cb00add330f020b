"""The deadline heap (`dexcli.engine.watch.Watch`) on a real clock: a cancelled entry is not
dropped when it is cancelled, only when it reaches the top, so without compaction a busy worker
with a long heartbeat timeout would keep every attempt of that timeout on it. No time passes
here: nothing is due, only arms and cancels (and in the second test, a virtual clock's jump)."""

from __future__ import annotations

import asyncio
import threading

from dexcli.engine.clock import Clock
from dexcli.engine.clock import run as run_on_clock
from dexcli.engine.watch import COMPACT_AT, Watch


def test_cancelled_deadlines_do_not_pile_up_on_a_real_clock() -> None:
    fired: list[object] = []

    async def go() -> tuple[int, int, list[int]]:
        loop = asyncio.get_running_loop()
        watch = Watch(loop, fired.append, eager=False)
        far = loop.time() + 3600.0  # an hour's heartbeat timeout: nothing comes due here
        live = [watch.arm(far + 10_000, ("live", i)) for i in range(10)]
        peak = 0
        for i in range(20 * COMPACT_AT):  # short attempts: each armed, then ended
            watch.arm(far + i * 0.001, i).cancel()
            peak = max(peak, len(watch))
        done = threading.Event()

        def cancel_elsewhere() -> None:  # a handler thread ends its attempts too
            for i in range(3 * COMPACT_AT):
                watch.arm(far + i * 0.001, i).cancel()
            done.set()

        threading.Thread(target=cancel_elsewhere).start()
        await asyncio.get_running_loop().run_in_executor(None, done.wait)
        peak = max(peak, len(watch))
        watch.arm(far, "last")  # an arm after the thread's cancels compacts if they are due
        kept = sorted(e.target[1] for e in live if e.target is not None)
        return peak, len(watch), kept

    peak, size, kept = asyncio.run(go())
    assert peak <= 2 * COMPACT_AT + 20  # bounded by the compaction, not by the 23,552 arms
    assert size <= 2 * COMPACT_AT + 20
    assert kept == list(range(10)) and not fired  # the live entries survive every compaction


def test_compaction_keeps_the_earliest_live_deadline_first() -> None:
    fired: list[object] = []

    async def go() -> list[object]:
        loop = asyncio.get_running_loop()
        watch = Watch(loop, fired.append, eager=False)  # the real clock's way: no tidying
        now = loop.time()
        soon = watch.arm(now + 0.05, "soon")
        for i in range(3 * COMPACT_AT):
            watch.arm(now + 100 + i, i).cancel()
        watch.arm(now + 200, "later")
        assert len(watch) < 3 * COMPACT_AT  # compacted
        await asyncio.sleep(0.1)  # virtual time: the clock jumps to the one deadline due
        assert soon.dead
        return list(fired)

    assert run_on_clock(go, Clock.virtual()) == ["soon"]
