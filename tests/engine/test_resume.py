"""Driving a flow in pieces: wait_for_flow(timeout) and then again, drive(until=...).

The reference (8.1) says a long-poll that times out is simply called again. The second drive
runs in a helper thread with a wall-time bound, so a drive loop that waits forever fails the
test instead of hanging the suite.

Both tests below failed on commit 964c9e9 (an attempt left RUNNING by a stopped drive loop was
never re-run; `drive(until=...)` only re-checked its predicate on engine events).
"""

from datetime import timedelta

import pytest

from dexcli import FlowStatus, LongPollTimeoutError
from tests.engine.engine_flows import Beat, Single
from tests.engine.engine_helpers import attempts, rel, step, within


def test_wait_for_flow_can_be_called_again_after_a_long_poll_timeout(env):
    env.start(Single(Beat(None, every=5, finish_after=30)), 0, "f")
    with pytest.raises(LongPollTimeoutError):
        env.client.wait_for_flow("f", timeout=timedelta(seconds=12))
    # the drive that timed out released the attempt it was running: runnable at once
    assert step(env, "f", "Beat-1")["status"] == "QUEUED"
    result = within(1.5, lambda: env.client.wait_for_flow("f"))
    assert result.status is FlowStatus.COMPLETED
    # never left to its heartbeat timeout (as a crashed worker's would be): INTERRUPTED at 12 s,
    # run again at once for its 30 s
    tries = attempts(env, "f", "Beat-1")
    assert [(a["outcome"], a["errorType"], rel(env, a["endTime"])) for a in tries] == [
        ("INTERRUPTED", None, 12), ("COMPLETED", None, 42)]


def test_a_long_poll_timeout_stops_at_the_requested_virtual_time(env):
    env.start(Single(Beat(None, every=5, finish_after=30)), 0, "f")
    with pytest.raises(LongPollTimeoutError):
        env.client.wait_for_flow("f", timeout=timedelta(seconds=12))
    assert round(env.clock.now() - env.t0, 3) == 12
    assert rel(env, step(env, "f", "Beat-1")["lastHeartbeatTime"]) == 10


def test_drive_until_a_virtual_time_stops_there(env):
    env.start(Single(Beat(None, every=5, finish_after=30)), 0, "f")
    env.drive(until=lambda: env.clock.now() >= env.t0 + 12)
    assert 12 <= env.clock.now() - env.t0 < 15  # not at the step's end (30 s)
    assert env.result("f").status is FlowStatus.RUNNING
