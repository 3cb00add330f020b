"""a timed-out attempt is cancelled (async) or fenced (sync in a thread).

Virtual time does not move while a handler thread is busy, so the sync handlers below move
the clock themselves (past the 60 s heartbeat window) and then wait, with short real sleeps
bounded to a few seconds, until the engine has fenced them.
"""

import asyncio
import threading
import time
from collections.abc import Generator
from typing import Any

from dexcli import (
    AsyncContext,
    Context,
    FlowStatus,
    Step,
    StepDecision,
    StepOutput,
    force_complete,
    go_to,
    graceful_complete,
    heartbeat,
)
from dexcli.sdk.errors import AttemptFencedError
from tests.engine.engine_flows import PROGRESS, Single
from tests.engine.engine_helpers import attempts, rel, step, step_ids


def wait_for_cancellation(context: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not context.is_cancellation_requested() and time.monotonic() < deadline:
        time.sleep(0.002)
    return context.is_cancellation_requested()


class Stalls(Step[int]):
    """Async. Attempt 1 heartbeats once, then hangs with no heartbeat; attempt 2 completes."""

    def __init__(self) -> None:
        self.log: dict[str, Any] = {}

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        loop = asyncio.get_running_loop()
        if context.attempt == 1:
            await context.heartbeat("cp1")
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.log["cancelled_at"] = loop.time()
                self.log["cancel_requested"] = context.is_cancellation_requested()
                for what, call in (("heartbeat", lambda: context.heartbeat("late")),
                                   ("stream", lambda: PROGRESS.write(context, "late"))):
                    try:
                        res = call()
                        if asyncio.iscoroutine(res):
                            await res
                        self.log[what] = "accepted"
                    except AttemptFencedError:
                        self.log[what] = "refused"
                raise
            return force_complete("attempt 1 was not cancelled")
        self.log["checkpoint_seen_by_2"] = context.get_last_heartbeat_value(str)
        return graceful_complete("second")


def test_a_timed_out_async_attempt_is_cancelled_and_its_late_calls_refused(env):
    s = Stalls()
    result = env.run(Single(s), 0, "f")
    assert result.status is FlowStatus.COMPLETED and result.single_output(str) == "second"
    assert s.log["cancelled_at"] - env.t0 == 60
    assert s.log["cancel_requested"] is True
    assert s.log["heartbeat"] == "refused"  # "the next call fails quickly"
    assert s.log["stream"] == "refused"
    assert s.log["checkpoint_seen_by_2"] == "cp1"
    assert env.stream_values("f") == []
    tries = attempts(env, "f", "Stalls-1")
    assert [(a["outcome"], a["errorType"]) for a in tries] == [("TIMED_OUT", "Heartbeat"), ("COMPLETED", None)]
    assert tries[0]["heartbeats"] == 1


class FencedGenerator(Step[int]):
    """Sync generator. Attempt 1 checkpoints, stalls past the window, sees the cancellation,
    then still yields a heartbeat and tries to finish; attempt 2 completes."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.log: dict[str, Any] = {}
        self.stalled = threading.Event()

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        if context.attempt == 1:
            yield heartbeat("cp1")
            self.env.clock.advance(61)  # the window (60 s) passes while this thread is busy
            self.log["cancel_requested"] = wait_for_cancellation(context)
            self.stalled.set()
            yield heartbeat("late")
            self.log["resumed_after_late_heartbeat"] = True
            return force_complete("late decision")
        self.stalled.wait(5)
        self.log["checkpoint_seen_by_2"] = context.get_last_heartbeat_value(str)
        return graceful_complete("second")


def test_a_timed_out_generator_attempt_is_fenced(env):
    g = FencedGenerator(env)
    result = env.run(Single(g), 0, "f")
    assert g.stalled.wait(5)
    assert g.log["cancel_requested"] is True
    assert result.status is FlowStatus.COMPLETED
    assert [c.output for c in result.completions] == ["second"]  # the late decision is never applied
    assert g.log["checkpoint_seen_by_2"] == "cp1"
    s = step(env, "f", "FencedGenerator-1")
    assert s["lastHeartbeatValue"] == "cp1"  # the late heartbeat was never applied
    tries = s["attempts"]
    assert [(a["outcome"], a["errorType"], a["heartbeats"]) for a in tries] == [
        ("TIMED_OUT", "Heartbeat", 1), ("COMPLETED", None, 0)]
    assert (rel(env, tries[0]["endTime"]), rel(env, tries[1]["startTime"])) == (60, 61)


class Next(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete("from Next")


class FencedSync(Step[int]):
    """Plain sync handler. Attempt 1 stalls past the window and then returns a decision."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.log: dict[str, Any] = {}
        self.late = threading.Event()

    def execute(self, context: Context, input: int) -> StepDecision:
        if context.attempt == 1:
            self.env.clock.advance(61)
            self.log["cancel_requested"] = wait_for_cancellation(context)
            self.late.set()
            return go_to(Next, 1)  # late (returned while attempt 2 runs): must be ignored
        self.late.wait(5)
        time.sleep(0.05)  # let attempt 1's decision reach the engine first
        return graceful_complete("second")


def test_a_timed_out_sync_attempt_decision_is_never_applied(env):
    s = FencedSync(env)
    result = env.run(Single(s, Next()), 0, "f")
    assert s.late.wait(5)
    assert s.log["cancel_requested"] is True
    assert result.status is FlowStatus.COMPLETED
    assert [c.output for c in result.completions] == ["second"]
    assert step_ids(env, "f") == ["FencedSync-1"]  # no Next-1 from the late go_to
    tries = attempts(env, "f", "FencedSync-1")
    assert [a["outcome"] for a in tries] == ["TIMED_OUT", "COMPLETED"]
    completed = [e for e in env.inspect("f")["history"] if e["type"] == "StepExecuteCompleted"]
    assert len(completed) == 1 and completed[0]["attempt"] == 2


class IgnoresCancel(Step[int]):
    """Async; swallows its cancellation (as a careless handler, or asyncio.wait_for in 3.11,
    can) and tries to carry on heartbeating."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        while True:
            try:
                await asyncio.sleep(1)
            except asyncio.CancelledError:
                self.log.append("swallowed")
            try:
                await context.heartbeat(len(self.log))
            except AttemptFencedError:
                self.log.append("refused")
                raise
            self.log.append("beat")


def test_an_attempt_that_swallows_its_cancellation_still_ends(env):
    s = IgnoresCancel()
    env.start(Single(s), 0, "f")
    env.drive(until=lambda: s.log.count("beat") >= 3)
    # Leaving drive() cancels the attempt's task; the handler swallows that, but its next
    # heartbeat is refused, so the attempt ends instead of running on (and drive returns,
    # releasing it: INTERRUPTED, runnable again).
    assert s.log[-2:] == ["swallowed", "refused"]
    (a,) = attempts(env, "f", "IgnoresCancel-1")
    assert a["outcome"] == "INTERRUPTED" and a["heartbeats"] == s.log.count("beat")
