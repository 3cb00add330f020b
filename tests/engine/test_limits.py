"""Rules 1-3: ExecuteMethodTimeout, HeartbeatTimeout, TotalDuration (all in virtual time)."""

from collections.abc import Generator

import pytest

from dexcli import Context, FlowErrorType, FlowStatus, Step, StepDecision, StepOutput, graceful_complete, heartbeat
from tests.engine.engine_flows import Beat, Flaky, Single, opts
from tests.engine.engine_helpers import attempts, history, rel, step

# --- ExecuteMethodTimeout ------------------------------------------------------------

def test_execute_method_timeout_fails_the_attempt_with_start_to_close(env):
    flow = Single(Beat(opts(timeout=20, attempts=2), every=5))
    result = env.run(flow, 0, "f")
    tries = attempts(env, "f", "Beat-1")
    assert [(a["outcome"], a["errorType"]) for a in tries] == [("TIMED_OUT", "StartToClose")] * 2
    # attempt 1: 0..20; retry after the 1 s default delay: 21..41
    assert [(rel(env, a["startTime"]), rel(env, a["endTime"])) for a in tries] == [(0, 20), (21, 41)]
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "StartToClose" in result.error_message


def test_execute_method_timeout_defaults_to_two_hours(env):
    env.run(Single(Beat(opts(attempts=1), every=30)), 0, "f")
    [a] = attempts(env, "f", "Beat-1")
    assert a["errorType"] == "StartToClose"
    assert rel(env, a["endTime"]) == 2 * 3600


def test_an_attempt_that_finishes_within_its_timeout_is_not_timed_out(env):
    result = env.run(Single(Beat(opts(timeout=20, attempts=1), every=6, finish_after=17)), 0, "f")
    assert result.status is FlowStatus.COMPLETED
    assert rel(env, attempts(env, "f", "Beat-1")[0]["endTime"]) == 18  # 3 beats of 6 s, then done


# --- HeartbeatTimeout -----------------------------------------------------------------

def test_heartbeat_timeout_defaults_to_60_seconds(env):
    result = env.run(Single(Beat(opts(attempts=1))), 0, "f")  # never heartbeats
    [a] = attempts(env, "f", "Beat-1")
    assert (a["outcome"], a["errorType"], rel(env, a["endTime"])) == ("TIMED_OUT", "Heartbeat", 60)
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "Heartbeat" in result.error_message


def test_explicit_heartbeat_timeout_and_retry(env):
    env.run(Single(Beat(opts(heartbeat=15, attempts=2))), 0, "f")
    tries = attempts(env, "f", "Beat-1")
    assert [(rel(env, a["startTime"]), rel(env, a["endTime"]), a["errorType"]) for a in tries] == [
        (0, 15, "Heartbeat"), (16, 31, "Heartbeat")]


@pytest.mark.parametrize("stream", [False, True], ids=["heartbeat", "stream-write"])
def test_a_heartbeat_or_a_stream_write_resets_the_window(env, stream):
    # 10 s window, a frame every 8 s, 40 s of work: passes only if every frame resets the window
    result = env.run(Single(Beat(opts(heartbeat=10, attempts=1), every=8, finish_after=40, stream=stream)), 0, "f")
    assert result.status is FlowStatus.COMPLETED, result
    [a] = attempts(env, "f", "Beat-1")
    assert rel(env, a["endTime"]) == 40
    assert (a["heartbeats"], a["streamWrites"]) == ((0, 5) if stream else (5, 0))


@pytest.mark.parametrize("stream", [False, True], ids=["heartbeat", "stream-write"])
def test_frames_further_apart_than_the_window_time_out(env, stream):
    env.run(Single(Beat(opts(heartbeat=10, attempts=1), every=12, finish_after=40, stream=stream)), 0, "f")
    [a] = attempts(env, "f", "Beat-1")
    assert (a["errorType"], rel(env, a["endTime"])) == ("Heartbeat", 10)


class GenBeat(Step[int]):
    """Sync generator: its code takes no virtual time, so it moves the clock itself."""

    def __init__(self, env, every: float, rounds: int) -> None:
        self.env, self.every, self.rounds = env, every, rounds

    def get_step_options(self):
        return opts(heartbeat=10, attempts=1)

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        for i in range(self.rounds):
            self.env.clock.advance(self.every)
            yield heartbeat(i)
        return graceful_complete("ok")


def test_a_generator_heartbeat_resets_the_window(env):
    result = env.run(Single(GenBeat(env, every=8, rounds=5)), 0, "f")
    assert result.status is FlowStatus.COMPLETED, result
    [a] = attempts(env, "f", "GenBeat-1")
    assert rel(env, a["endTime"]) == 40 and a["heartbeats"] == 5


# --- TotalDuration --------------------------------------------------------------------

def test_total_duration_ends_a_running_attempt_with_schedule_to_close(env):
    # method timeout 2 h and a steady heartbeat: only TotalDuration can end this attempt
    result = env.run(Single(Beat(opts(total=30), every=5)), 0, "f")
    [a] = attempts(env, "f", "Beat-1")
    assert (a["outcome"], a["errorType"], rel(env, a["endTime"])) == ("TIMED_OUT", "ScheduleToClose", 30)
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "ScheduleToClose" in result.error_message


def test_total_duration_counts_from_scheduling_and_covers_retries(env):
    # attempt 1 fails at once; attempt 2 (from 1 s) heartbeats forever. The 30 s budget ends it
    # at 30 s after scheduling, not 30 s after its own start.
    env.run(Single(Beat(opts(total=30), every=5, fail_attempts=(1,))), 0, "f")
    tries = attempts(env, "f", "Beat-1")
    assert [(rel(env, a["startTime"]), rel(env, a["endTime"]), a["errorType"]) for a in tries] == [
        (0, 0, "builtins.RuntimeError"), (1, 30, "ScheduleToClose")]
    s = step(env, "f", "Beat-1")
    assert rel(env, s["scheduledTime"]) == 0 and s["status"] == "FAILED"


def test_total_duration_gates_new_attempts(env):
    # a failure every 10 s: attempts at 0, 10, 20, 30; the next one (40 s) would be past 35 s
    result = env.run(Single(Flaky(opts(initial=10, coefficient=1.0, total=35), fail_always=True)), 0, "f")
    assert [rel(env, a["startTime"]) for a in attempts(env, "f", "Flaky-1")] == [0, 10, 20, 30]
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    [failed] = [e for e in history(env, "f") if e["type"] == "StepExecuteFailed"]
    assert failed["attempt"] == 4 and failed["errorType"] == "builtins.RuntimeError"


def test_total_duration_left_allows_a_retry(env):
    # same as above with 41 s: the retry at 40 s still starts (40 < 41) and succeeds
    flaky = Flaky(opts(initial=10, coefficient=1.0, total=41), fail_attempts=(1, 2, 3, 4))
    result = env.run(Single(flaky), 0, "f")
    assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 5
    assert [rel(env, a["startTime"]) for a in attempts(env, "f", "Flaky-1")] == [0, 10, 20, 30, 40]
