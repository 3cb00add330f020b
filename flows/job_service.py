"""A simulated external job API, kept in the dex database so every process sees one job.

The job reports QUEUED, then RUNNING after 2 s, then SUCCEEDED with `artifact for <job-id>`
at its duration (6 s by default), or FAILED there if it was set to fail; `complete_job`
finishes it early. Its clock is the engine's clock, so virtual time and `dex time skip`
move it too. Duration and the fails switch are properties of the job, set before the flow
starts (`configure_job`), so the flow code stays as the seed wrote it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from dexcli.host import Host, current_host

FAKE_JOB_DURATION_SECONDS = 6.0
RUNNING_AFTER_SECONDS = 2.0
_NS = "polling.jobs"


class JobState(str, enum.Enum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: JobState
    result: str = ""


class FakeJobService:
    """Stands in for an external job API such as a cloud build service.

    Its state lives in the dex database through a host (dexcli.host): the one given, else
    the host of the engine running the calling step.
    """

    def __init__(self, host: Host | None = None) -> None:
        self._host = host

    def _h(self) -> Host:
        return self._host if self._host is not None else current_host()

    def configure_job(self, job_id: str, *, duration_seconds: float | None = None, fails: bool = False) -> None:
        """Set how a job will behave before it starts (knobs for demos and tests)."""
        duration = FAKE_JOB_DURATION_SECONDS if duration_seconds is None else duration_seconds  # 0: done at once
        spec = {"duration": duration, "fails": fails,
                "started_at": None, "completed_at": None}
        self._h().kv_put(_NS, job_id, spec)

    async def start_job(self, job_id: str) -> None:
        """Starts a job once per job ID, so a retried step does not start a second job.
        Starts asked for in the same event-loop pass share one commit, the way a real job API
        batches its own writes."""
        host = self._h()
        now = host.now()

        def start(rec: dict[str, Any] | None) -> dict[str, Any]:
            rec = dict(rec or {"duration": FAKE_JOB_DURATION_SECONDS, "fails": False, "completed_at": None})
            if rec.get("started_at") is None:
                rec["started_at"] = now
            return rec

        await host.kv_update_async(_NS, job_id, start)

    async def get_job_status(self, job_id: str) -> JobStatus:
        host = self._h()
        rec = host.kv_get(_NS, job_id)
        if rec is None or rec.get("started_at") is None:
            raise LookupError(f"job {job_id} not found")
        return status_of(job_id, rec, host.now())

    def complete_job(self, job_id: str) -> None:
        """Finishes a job early so callers do not wait for its full duration."""
        host = self._h()
        now = host.now()

        def complete(rec: dict[str, Any] | None) -> dict[str, Any]:
            if rec is None or rec.get("started_at") is None:
                raise LookupError(f"job {job_id} not found")
            rec = dict(rec)
            if rec.get("completed_at") is None:
                rec["completed_at"] = now
            return rec

        host.kv_update(_NS, job_id, complete)

    def describe_job(self, job_id: str) -> JobStatus | None:
        host = self._h()
        rec = host.kv_get(_NS, job_id)
        if rec is None or rec.get("started_at") is None:
            return None
        return status_of(job_id, rec, host.now())


def status_of(job_id: str, rec: dict[str, Any], now: float) -> JobStatus:
    elapsed = now - rec["started_at"]
    duration = rec.get("duration")
    duration = FAKE_JOB_DURATION_SECONDS if duration is None else duration
    if rec.get("completed_at") is not None:
        return JobStatus(job_id, JobState.SUCCEEDED, f"artifact for {job_id}")
    if elapsed >= duration:
        if rec.get("fails"):
            return JobStatus(job_id, JobState.FAILED)
        return JobStatus(job_id, JobState.SUCCEEDED, f"artifact for {job_id}")
    if elapsed >= min(RUNNING_AFTER_SECONDS, duration / 3):
        return JobStatus(job_id, JobState.RUNNING)
    return JobStatus(job_id, JobState.QUEUED)
