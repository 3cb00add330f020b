"""Driving flows to an end: the one way `dex run`, `dex resume`, `dex worker`,
`Client.wait_for_flow` and `DexTestEnv` run the engine.

    runner = Runner(engine)
    runner.drive([flow_id], until=runner.closed(flow_id))    # one flow, to its end
    runner.drive(None, until_idle=True)                         # every flow, until idle

`drive` runs the engine's loop on its clock in this thread; `drive_async` is the same for
code already on that loop. `deadline` (engine clock) ends the drive even if `until` is false.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from dexcli.engine.clock import run as run_on_clock
from dexcli.engine.core import Engine


class Runner:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def closed(self, flow_id: str) -> Callable[[], bool]:
        """A stop condition: the flow has ended (or is gone)."""
        store = self.engine.store

        def done() -> bool:
            flow = store.get_flow(flow_id)
            return flow is None or not flow.is_running

        return done

    def drive(self, flow_ids: list[str] | None, *, until: Callable[[], bool] | None = None,
              until_idle: bool = False, deadline: float | None = None, poll: float | None = None) -> None:
        """Drive on this thread. Interrupted (Ctrl-C, or any exception out of the loop), the
        attempts it was running are released (`Engine.release_interrupted`) before it re-raises."""
        try:
            run_on_clock(lambda: self.drive_async(flow_ids, until=until, until_idle=until_idle, deadline=deadline,
                                                  poll=poll), self.engine.clock)
        except BaseException:
            with contextlib.suppress(Exception):  # the original error matters more
                self.engine.release_interrupted()
            raise

    async def drive_async(self, flow_ids: list[str] | None, *, until: Callable[[], bool] | None = None,
                          until_idle: bool = False, deadline: float | None = None, poll: float | None = None) -> None:
        """Drive until `until()` is true (checked on every change, and every `poll` seconds),
        or with `until_idle` until nothing of these flows is queued, retrying or running."""
        engine = self.engine
        stop = until
        if deadline is not None:
            clock = engine.clock

            def stop() -> bool:
                return clock.now() >= deadline or (until is not None and until())

            asyncio.get_running_loop().call_at(deadline, engine.wake)
        if stop is not None and stop():
            return
        await engine.run(flow_ids, until_idle=until_idle, stop=stop, stop_poll=poll)
