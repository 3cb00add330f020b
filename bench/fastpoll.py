"""A bench-only polling flow: the seed's PollingFlow shape with the issue's pollers constants.

Same steps and behaviour as `flows/polling.py` (a Stream message on each status change, a
heartbeat otherwise, Dex limits bound the wait), but AwaitJob polls every 0.5 s; the job is
configured by the harness to finish at 3 s (`FakeJobService.configure_job`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from dexcli import (
    AsyncContext,
    Context,
    Flow,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    force_fail,
    go_to,
    graceful_complete,
)
from flows.job_service import FakeJobService, JobState, JobStatus

POLL_INTERVAL = timedelta(seconds=0.5)
JOB_DURATION_SECONDS = 3.0
JOB_CALL_TIMEOUT = timedelta(seconds=10)
MAX_JOB_WAIT = timedelta(minutes=10)

FAST_JOB_PROGRESS = Stream("FastJobProgress", JobStatus, 1 << 20)


class RecordFastJobWaitFailure(Step[str]):
    def execute(self, context: Context, job_id: str) -> StepDecision:
        failure = context.recovery_error
        assert failure is not None
        return force_fail(f"waiting for job {job_id} failed: {failure.error_type}: {failure.detail}")


class AwaitFastJob(Step[str]):
    def __init__(self, jobs: FakeJobService) -> None:
        self.jobs = jobs

    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_method_timeout=MAX_JOB_WAIT,
            heartbeat_timeout=timedelta(minutes=1),
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=1),
                backoff_coefficient=2.0,
                maximum_attempts=3,
                total_duration=MAX_JOB_WAIT,
            ),
        ).on_execute_failure_proceed_to(RecordFastJobWaitFailure)

    async def execute(self, context: AsyncContext, job_id: str) -> StepDecision:
        reported_state = context.get_last_heartbeat_value(JobState)
        while True:
            status = await asyncio.wait_for(self.jobs.get_job_status(job_id), JOB_CALL_TIMEOUT.total_seconds())
            if status.state is JobState.SUCCEEDED:
                return graceful_complete(status.result)
            if status.state is JobState.FAILED:
                return force_fail(f"job {job_id} failed")
            if status.state != reported_state:
                FAST_JOB_PROGRESS.write(context, status)
                reported_state = status.state
            else:
                await context.heartbeat(reported_state)
            await asyncio.sleep(POLL_INTERVAL.total_seconds())


class StartFastJob(Step[None]):
    def __init__(self, jobs: FakeJobService) -> None:
        self.jobs = jobs

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:
        job_id = context.flow_id
        await asyncio.wait_for(self.jobs.start_job(job_id), JOB_CALL_TIMEOUT.total_seconds())
        return go_to(AwaitFastJob, job_id)


class FastPollingFlow(Flow[None]):
    """PollingFlow with a 0.5 s poll; the harness sets each job to finish at 3 s."""

    def __init__(self, jobs: FakeJobService | None = None) -> None:
        jobs = jobs or FakeJobService()
        self.start_job = StartFastJob(jobs)
        self.await_job = AwaitFastJob(jobs)
        self.record_failure = RecordFastJobWaitFailure()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.start_job).other_steps(self.await_job, self.record_failure)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(FAST_JOB_PROGRESS)
