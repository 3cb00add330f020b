"""An attempt of a plain sync `execute` handler, driven by callbacks instead of a task.

Such an attempt only waits twice: for its handler thread, then for its group commit. A task
per attempt costs a coroutine frame per await and a wake-up per wait; here the thread call is
started from `Engine.start_attempt` (one loop pass later, where a task's first step would run),
its result is taken as the handler threads deliver it (no future), and the commit's outcome in
the unit's `done` and its future's done-callback. Every rule of the task path holds:

  - fault points: attempt-start, `--fail`, `--stall` (no thread call: the watchdog ends it),
    before-commit and after-commit fire where they fire for a task;
  - a timeout while the handler runs is judged and committed at once; the thread's late
    result is ignored (as a cancelled task ignores it);
  - fenced (lease lost, flow closed, a cancelled step) while it waits for its thread or its
    commit: the wait is cancelled and nothing of it is committed (`GroupCommit.flush` skips a
    cancelled unit);
  - stopping (the loop's teardown, `Engine.run` cancelled): `halt` ends every such attempt
    as a cancelled task ends, so `Engine.release_interrupted` releases it.

Only loops with handler threads (`ClockEventLoop.call_in_thread`) take this path; generators,
`wait_for` and async handlers keep their task.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dexcli.engine import transitions as t
from dexcli.engine.attempt import AttemptRun, SyncContext, stalls
from dexcli.engine.host import current_flow
from dexcli.engine.outcome import judge
from dexcli.sdk.errors import AttemptFencedError
from dexcli.store import Method

if TYPE_CHECKING:
    from dexcli.engine.core import Engine


class SyncAttempt:
    """Drives one attempt (its `AttemptRun.driver`): `cancel`, `done` and `cancelling` as a
    task's. While `in_thread` it waits for its handler thread; `waiting` is its commit's future."""

    @staticmethod
    def fits(run: AttemptRun, loop: asyncio.AbstractEventLoop) -> bool:
        return (run.spec.handler_kind == "sync" and run.method is Method.EXECUTE
                and hasattr(loop, "call_in_thread"))

    def __init__(self, engine: Engine, run: AttemptRun, ctx: contextvars.Context) -> None:
        self.engine = engine
        self.run = run
        self.ctx = ctx
        self.in_thread = False
        self.waiting: asyncio.Future[Any] | None = None
        self.judged = False  # its outcome is decided (the handler returned, or it timed out)
        self.over = False
        assert run.loop is not None
        run.loop.call_soon(self._start, context=ctx)

    def done(self) -> bool:
        return self.over

    def cancelling(self) -> int:
        return 0  # nothing can swallow a cancellation here: `cancel` fences at once

    def cancel(self, msg: Any | None = None) -> bool:
        """The watchdog fired (judge the timeout and commit it now), or it was fenced or this
        process stops: cancel what it waits for; nothing of it is committed."""
        if self.over:
            return False
        self.in_thread = False  # its late result is ignored
        waiting, self.waiting = self.waiting, None
        if waiting is not None:
            waiting.cancel()
        if not self.judged and self.run.timed_out is not None:
            self._judge(None, None)
        else:
            self.engine.interrupted(self.run)
            self._finish()
        return True

    def _start(self) -> None:
        if self.over:  # cancelled before it began
            return
        engine, run = self.engine, self.run
        run.began = True
        current_flow.set(run.flow_id)  # its context (and its thread's): the host's clock is the flow's
        try:
            engine.attempt_started(run)
        except Exception as exc:
            self._unrecorded(exc)
            return
        try:
            value = engine.arm(run)
            if stalls(run):
                return
            loop: Any = run.loop  # it has call_in_thread (see `fits`)
            self.in_thread = True
            loop.call_in_thread(self._returned, run.spec.instance.execute, SyncContext(run), value)
        except (Exception, AttemptFencedError) as exc:
            self.in_thread = False
            self._returned_with(None, exc)

    def _returned(self, ok: bool, value: Any) -> None:
        """The handler thread's outcome (called by its delivery: must not raise)."""
        if self.in_thread:  # else cancelled: fenced, timed out (judged already) or stopped
            self.in_thread = False
            self.ctx.run(self._took, ok, value)

    def _took(self, ok: bool, value: Any) -> None:
        if ok:
            self._returned_with(value, None)
        elif isinstance(value, (Exception, AttemptFencedError)):
            self._returned_with(None, value)
        elif isinstance(value, asyncio.CancelledError):  # as the task would take it: stopped
            self.engine.interrupted(self.run)
            self._finish()
        else:  # KeyboardInterrupt, SystemExit in the handler: they end the loop, as from a task
            self._finish()
            assert self.run.loop is not None
            self.run.loop.call_soon(_reraise, value)

    def _returned_with(self, result: Any, error: BaseException | None) -> None:
        self.run.disarm()
        self._judge(result, error)

    def _judge(self, result: Any, error: BaseException | None) -> None:
        self.judged = True
        engine, run = self.engine, self.run
        try:
            unit = engine.endings.unit(run, judge(run, result, error, engine.definitions, engine.now(run.flow_id)))
        except Exception as exc:
            self._unrecorded(exc)
            return
        if unit is None:
            self._finish()
            return
        reported = unit.done

        def done(result: Any) -> None:
            try:
                if reported is not None:
                    reported(result)
            finally:
                self._finish()

        unit.done = done
        self.waiting = engine.commits.submit(unit)
        self.waiting.add_done_callback(self._committed, context=self.ctx)

    def _committed(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():  # fenced or stopped before its commit (`cancel` did the rest)
            return
        if future is self.waiting:
            self.waiting = None
        error = future.exception()
        if isinstance(error, t.Fenced):
            self.engine.endings.not_owned(self.run)
        elif isinstance(error, Exception):  # not applied; or committed, but reporting it failed
            self.engine.unrecorded(self.run, error)
        self._finish()

    def _unrecorded(self, exc: Exception) -> None:
        self.engine.unrecorded(self.run, exc)
        self._finish()

    def _finish(self) -> None:
        """What the task's `finally` does: its watchdog off, the attempt forgotten. The run
        then points to `ENDED` instead of this driver: the two referring to each other were a
        cycle per attempt that only the garbage collector's rare full passes freed (a long-lived
        worker's memory crept with every flow)."""
        if self.over:
            return
        self.over = True
        self.run.disarm()
        self.run.driver = ENDED
        self.engine.attempt_ended(self.run)


class _Ended:
    """The driver of an attempt whose callbacks are over (`AttemptRun.driver` after `_finish`)."""

    @staticmethod
    def done() -> bool:
        return True

    @staticmethod
    def cancel(msg: Any | None = None) -> bool:
        return False

    @staticmethod
    def cancelling() -> int:
        return 0


ENDED = _Ended()


def halt(runs: Iterable[AttemptRun]) -> None:
    """This process stops (its loop is torn down, or `Engine.run` was cancelled): end the
    callback-driven attempts as their tasks would be cancelled — those not fenced yet are
    left to `Engine.release_interrupted`."""
    for run in runs:
        if isinstance(run.driver, SyncAttempt):
            run.driver.cancel()


def _reraise(error: BaseException) -> None:
    raise error
