"""The seed's polling example (flows/polling.py) in virtual time.

The flow code is the seed's; scenarios are set up through the simulated job (duration, fails,
complete_job) or a FakeJobService subclass that misbehaves like a real API would.
"""

import asyncio

from dexcli import FlowErrorType, FlowStatus
from dexcli.engine.host import StoreHost
from dexcli_flows.job_service import FakeJobService, JobState, JobStatus
from dexcli_flows.polling import JOB_PROGRESS, PollingFlow
from tests.engine.engine_helpers import attempts, history, rel, step, step_ids


def states(env, flow_id):
    return [v["state"] for v in env.stream_values(flow_id, "JobProgress")]


def close_time(env, flow_id):
    return rel(env, env.inspect(flow_id)["summary"]["closeTime"])


def test_happy_path(env):
    result = env.run(PollingFlow(), None, "job-1")
    assert result.status is FlowStatus.COMPLETED
    [c] = result.completions
    assert (c.step_type, c.step_execution_id, c.output) == ("AwaitJob", "AwaitJob-1", "artifact for job-1")
    assert result.single_output(str) == "artifact for job-1"
    assert close_time(env, "job-1") == 6
    # exactly two progress messages, QUEUED then RUNNING, from AwaitJob-1 at 0 s and 2 s
    page = env.client.list_stream_messages("job-1", JOB_PROGRESS, 100)
    msgs = list(reversed(page.messages))
    assert [m.value for m in msgs] == [JobStatus("job-1", JobState.QUEUED), JobStatus("job-1", JobState.RUNNING)]
    assert [m.source for m in msgs] == ["#AwaitJob-1"] * 2
    assert [rel(env, m.created_time.isoformat()) for m in msgs] == [0, 2]
    first = env.client.read_stream("job-1", JOB_PROGRESS, "")
    assert first.value.state is JobState.QUEUED
    assert env.client.read_stream("job-1", JOB_PROGRESS, first.resume_token).value.state is JobState.RUNNING
    # the history of the reference (11.1)
    events = history(env, "job-1")
    assert [(e["type"], e.get("stepExecutionId")) for e in events] == [
        ("FlowStarted", None), ("StepExecuteCompleted", "StartJob-1"),
        ("StepExecuteCompleted", "AwaitJob-1"), ("FlowClosed", None)]
    assert (events[0]["startStepType"], events[0]["input"]) == ("StartJob", None)
    assert events[1]["decision"] == {"kind": "goTo", "next": [
        {"stepType": "AwaitJob", "stepExecutionId": "AwaitJob-1", "input": "job-1"}]}
    assert events[2]["decision"] == {"kind": "gracefulComplete", "output": "artifact for job-1"}
    assert (events[3]["flowStatus"], rel(env, events[3]["eventTime"])) == ("COMPLETED", 6)
    # one attempt; the unchanged RUNNING round at 4 s was a heartbeat with the checkpoint
    [a] = attempts(env, "job-1", "AwaitJob-1")
    assert (a["heartbeats"], a["streamWrites"]) == (1, 2)
    assert step(env, "job-1", "AwaitJob-1")["lastHeartbeatValue"] == "RUNNING"


def test_completed_early(env, jobs):
    jobs.configure_job("job-e", duration_seconds=600)

    def complete_at_10s(event):
        if event.type == "heartbeat" and event.time - env.t0 >= 10 and not jobs_done:
            jobs_done.append(event.time)
            jobs.complete_job("job-e")

    jobs_done: list[float] = []
    env.engine.events.listeners.append(complete_at_10s)
    result = env.run(PollingFlow(), None, "job-e")
    assert [t - env.t0 for t in jobs_done] == [10]
    assert result.single_output(str) == "artifact for job-e"
    assert close_time(env, "job-e") == 12  # the next poll after completion, long before 600 s
    assert states(env, "job-e") == ["QUEUED", "RUNNING"]
    assert len(attempts(env, "job-e", "AwaitJob-1")) == 1


class FlakyJobs(FakeJobService):
    """The job API fails (ConnectionError) at the given virtual seconds after t0."""

    def __init__(self, t0, fail_at):
        super().__init__()
        self.t0, self.fail_at = t0, set(fail_at)

    async def get_job_status(self, job_id):
        from dexcli.host import current_host

        if round(current_host().now() - self.t0, 3) in self.fail_at:
            raise ConnectionError("job API unavailable")
        return await super().get_job_status(job_id)


def test_transient_errors_are_retried_with_backoff_from_the_checkpoint(env, jobs):
    jobs.configure_job("job-t", duration_seconds=20)
    # polls at 0 (QUEUED), 2 (RUNNING), 4 (RUNNING, heartbeat), 6 fails; retry at 7, 9 fails;
    # retry 2 s later at 11, then polls until SUCCEEDED at 21
    result = env.run(PollingFlow(FlakyJobs(env.t0, fail_at={6, 9})), None, "job-t")
    assert result.single_output(str) == "artifact for job-t"
    tries = attempts(env, "job-t", "AwaitJob-1")
    assert [(rel(env, a["startTime"]), rel(env, a["endTime"]), a["errorType"]) for a in tries] == [
        (0, 6, "builtins.ConnectionError"), (7, 9, "builtins.ConnectionError"), (11, 21, None)]
    # the retries read the RUNNING checkpoint, so RUNNING was not reported again
    assert states(env, "job-t") == ["QUEUED", "RUNNING"]
    assert [a["streamWrites"] for a in tries] == [2, 0, 0]
    assert close_time(env, "job-t") == 21


class LostJobs(FakeJobService):
    """Starting a job is lost (e.g. the service restarted): every status call is LookupError."""

    async def start_job(self, job_id):
        return None


def test_job_api_errors_exhaust_the_retries_and_route_to_the_recovery_step(env):
    result = env.run(PollingFlow(LostJobs()), None, "job-l")
    tries = attempts(env, "job-l", "AwaitJob-1")
    assert [rel(env, a["startTime"]) for a in tries] == [0, 1, 3]  # 1 s, then 2 s
    assert {a["errorType"] for a in tries} == {"builtins.LookupError"}
    rec = step(env, "job-l", "RecordJobWaitFailure-1")
    assert (rec["input"], rec["fromStepExecutionId"]) == ("job-l", "AwaitJob-1")
    assert rec["recoveryError"] == {"errorType": "builtins.LookupError", "detail": "job job-l not found"}
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "waiting for job job-l failed: builtins.LookupError: job job-l not found"


class StuckJobs(FakeJobService):
    """At the given virtual second the status call hangs and ignores cancellation (a stuck
    client library), so the attempt sends no heartbeat until Dex times it out."""

    def __init__(self, t0, stuck_at):
        super().__init__()
        self.t0, self.stuck_at = t0, stuck_at

    async def get_job_status(self, job_id):
        from dexcli.host import current_host

        if round(current_host().now() - self.t0, 3) == self.stuck_at:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:  # the call timeout (10 s) does not free it
                await asyncio.sleep(3600)
        return await super().get_job_status(job_id)


def test_a_stuck_attempt_fails_with_heartbeat_and_is_retried(env, jobs):
    jobs.configure_job("job-s", duration_seconds=100)
    result = env.run(PollingFlow(StuckJobs(env.t0, stuck_at=6)), None, "job-s")
    assert result.single_output(str) == "artifact for job-s"
    tries = attempts(env, "job-s", "AwaitJob-1")
    # last frame: the heartbeat at 4 s -> timed out at 64 s; retried 1 s later
    assert [(rel(env, a["startTime"]), rel(env, a["endTime"]), a["outcome"], a["errorType"]) for a in tries] == [
        (0, 64, "TIMED_OUT", "Heartbeat"), (65, 101, "COMPLETED", None)]
    assert states(env, "job-s") == ["QUEUED", "RUNNING"]
    assert close_time(env, "job-s") == 101


def test_a_job_that_outlasts_max_job_wait_moves_to_record_job_wait_failure(env, jobs):
    jobs.configure_job("job-x", duration_seconds=3600)
    result = env.run(PollingFlow(), None, "job-x")
    [a] = attempts(env, "job-x", "AwaitJob-1")  # the 10-minute budget is spent: no retry
    assert (a["outcome"], a["errorType"], rel(env, a["endTime"])) == ("TIMED_OUT", "StartToClose", 600)
    rec = step(env, "job-x", "RecordJobWaitFailure-1")
    assert rec["input"] == "job-x" and rec["recoveryError"]["errorType"] == "StartToClose"
    assert rel(env, rec["scheduledTime"]) == 600
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert rec["recoveryError"]["detail"] == "activity StartToClose timeout"  # the server's (Temporal's) text
    assert result.error_message == "waiting for job job-x failed: StartToClose: activity StartToClose timeout"
    assert close_time(env, "job-x") == 600
    assert states(env, "job-x") == ["QUEUED", "RUNNING"]
    assert [e["type"] for e in history(env, "job-x")] == [
        "FlowStarted", "StepExecuteCompleted", "StepExecuteFailed", "StepExecuteCompleted", "FlowClosed"]


def test_a_failed_job_fails_the_flow(env, jobs):
    jobs.configure_job("job-f", fails=True)
    result = env.run(PollingFlow(), None, "job-f")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "job job-f failed"
    assert close_time(env, "job-f") == 6
    assert step_ids(env, "job-f") == ["StartJob-1", "AwaitJob-1"]  # a decision, not a failure to recover
    assert states(env, "job-f") == ["QUEUED", "RUNNING"]


def test_starting_the_job_twice_is_a_no_op(env, jobs):
    env.run(PollingFlow(), None, "job-1")
    rt = StoreHost(env.store, env.clock)
    before = env.store.kv_get("polling.jobs", "job-1")
    asyncio.run(FakeJobService(rt).start_job("job-1"))
    assert env.store.kv_get("polling.jobs", "job-1") == before


def test_jobs_started_together_share_one_commit_and_each_starts_once(env):
    rt = StoreHost(env.store, env.clock)
    service = FakeJobService(rt)
    env.clock.advance(5)
    service.configure_job("slow", duration_seconds=60)
    before = env.store.commits

    async def go():
        await asyncio.gather(*(service.start_job(j) for j in ("a", "b", "slow", "a")))

    asyncio.run(go())
    assert env.store.commits - before == 1
    recs = {j: env.store.kv_get("polling.jobs", j) for j in ("a", "b", "slow")}
    assert {r["started_at"] for r in recs.values()} == {env.clock.now()}
    assert recs["slow"]["duration"] == 60  # the configured job kept its settings


    async def failing_and_ok():  # one update that raises writes nothing; the other still commits
        return await asyncio.gather(rt.kv_update_async("polling.jobs", "x", lambda rec: 1 / 0),
                                    rt.kv_update_async("polling.jobs", "y", lambda rec: {"n": 1}),
                                    return_exceptions=True)

    res = asyncio.run(failing_and_ok())
    assert isinstance(res[0], ZeroDivisionError) and res[1] == {"n": 1}
    assert env.store.kv_get("polling.jobs", "x") is None and env.store.kv_get("polling.jobs", "y") == {"n": 1}


def test_flows_started_by_an_async_client_while_a_worker_runs_are_leased_at_start(env):
    """The worker leases each start step in the start's own commit; its attempts still run
    with the engine's runtime (the job service needs it), though a client task started them."""
    from dexcli import AsyncClient
    from dexcli.engine.clock import run as run_on_clock

    client = AsyncClient(engine=env.engine)
    flow = PollingFlow()
    ids = [f"w{i}" for i in range(3)]

    async def go():
        worker = asyncio.ensure_future(env.engine.drive_async(None, until_idle=False, until=lambda: all(
            env.result(f).is_terminal for f in ids if env.store.get_flow(f)) and len(started) == 3, poll=1,
            release=False))
        await asyncio.sleep(0)
        started.extend(await asyncio.gather(*(client.start_flow(flow, f, None) for f in ids)))
        await worker

    started: list = []
    commits = env.store.commits
    run_on_clock(go, env.clock)
    for f in ids:
        assert env.result(f).single_output(str) == f"artifact for {f}"
        (a,) = attempts(env, f, "StartJob-1")
        assert a["outcome"] == "COMPLETED" and a["startTime"] == env.inspect(f)["summary"]["startTime"]
    assert env.store.commits - commits < 3 * 3  # starts grouped, no claims


def test_a_cancelled_worker_stops_even_when_its_wake_fires_at_the_same_moment(env):
    """The client fails (a bad flow id) while a worker runs a flow on the virtual clock; the
    loop's shutdown cancels the worker, whose wake-up can land in the same pass (3.11's
    wait_for then swallows the cancel). It must still stop."""
    import threading

    from dexcli import AsyncClient
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.start_request import InvalidFlowIdError

    client = AsyncClient(engine=env.engine)
    outcome: list = []

    async def go():
        worker = asyncio.ensure_future(env.engine.drive_async(None, until_idle=False, until=lambda: False, poll=1,
                                                              release=False))
        await asyncio.sleep(0)
        await asyncio.gather(client.start_flow(PollingFlow(), "first", None),
                             client.start_flow(PollingFlow(), "bad/id", None))  # the second raises
        await worker

    def main():
        try:
            run_on_clock(go, env.clock)
        except InvalidFlowIdError as exc:
            outcome.append(exc)

    t = threading.Thread(target=main, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the worker kept running after its loop was shut down"
    assert outcome and "bad/id" in str(outcome[0])
