"""Driving flows to an end: the one way `dex run`, `dex resume`, `dex worker`,
`Client.wait_for_flow` and `DexTestEnv` run the engine.

    runner = Runner(engine)
    runner.drive([flow_id], until=runner.closed(flow_id))    # one flow, to its end
    runner.drive(None, until_idle=True)                         # every flow, until idle

`drive` runs the engine's loop on its clock in this thread; `drive_async` is the same for
code already on that loop. `deadline` (engine clock) ends the drive even if `until` is false.
"""

from __future__ import annotations

from collections.abc import Callable

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
        """Drive on this thread (`Engine.drive`): however it ends, what it leased and did not
        finish is released."""
        self.engine.drive(flow_ids, until=until, until_idle=until_idle, deadline=deadline, poll=poll)

    async def drive_async(self, flow_ids: list[str] | None, *, until: Callable[[], bool] | None = None,
                          until_idle: bool = False, deadline: float | None = None, poll: float | None = None) -> None:
        """Drive until `until()` is true (checked on every change, and every `poll` seconds),
        or with `until_idle` until nothing of these flows is queued, retrying or running. The
        caller (the CLI's driver, a Worker) releases what it leaves once its loop is torn down."""
        await self.engine.drive_async(flow_ids, until=until, until_idle=until_idle, deadline=deadline, poll=poll,
                                      release=False)
