"""A simulated external job API, kept in the dex database so every process sees one job.

The job reports QUEUED, then RUNNING after 2 s, then SUCCEEDED with `artifact for <job-id>`
at its duration (6 s by default), or FAILED there if it was set to fail; `complete_job`
finishes it early. Its clock is the engine's clock, so virtual time and `dex time skip`
move it too. Duration and the fails switch are properties of the job, set before the flow
starts (`configure_job`), so the flow code stays as the seed wrote it.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any, Callable

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


_pending: dict[Any, list[tuple[str, Callable[[Any], Any], "asyncio.Future[Any]"]]] = {}


async def _update_soon(store: Any, job_id: str, fn: Callable[[Any], Any]) -> Any:
    """Write a job record; writes asked for in the same event-loop pass share one commit, the
    way a real job API batches its own writes. Returns once this one is committed."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()
    queue = _pending.setdefault(store, [])
    queue.append((job_id, fn, fut))
    if len(queue) == 1:
        loop.call_soon(_flush, store)
    return await fut


def _flush(store: Any) -> None:
    batch = _pending.pop(store, [])
    try:
        results = store.kv_update_many([(_NS, job_id, fn) for job_id, fn, _ in batch])
    except Exception as exc:
        results = [exc] * len(batch)
    for (_, _, fut), res in zip(batch, results):
        if not fut.done():
            fut.set_exception(res) if isinstance(res, Exception) else fut.set_result(res)


class FakeJobService:
    """Stands in for an external job API such as a cloud build service.

    With no runtime given it uses the runtime of the engine that is running the step.
    """

    def __init__(self, runtime: Any = None) -> None:
        self._runtime = runtime

    def _rt(self) -> Any:
        if self._runtime is not None:
            return self._runtime
        from dexcli.engine.runtime import current_runtime

        return current_runtime()

    def configure_job(self, job_id: str, *, duration_seconds: float | None = None, fails: bool = False) -> None:
        """Set how a job will behave before it starts (knobs for demos and tests)."""
        rt = self._rt()
        spec = {"duration": duration_seconds or FAKE_JOB_DURATION_SECONDS, "fails": fails,
                "started_at": None, "completed_at": None}
        rt.store.kv_put(_NS, job_id, spec)

    async def start_job(self, job_id: str) -> None:
        """Starts a job once per job ID, so a retried step does not start a second job."""
        rt = self._rt()
        now = rt.clock.now()

        def start(rec: dict[str, Any] | None) -> dict[str, Any]:
            rec = dict(rec or {"duration": FAKE_JOB_DURATION_SECONDS, "fails": False, "completed_at": None})
            if rec.get("started_at") is None:
                rec["started_at"] = now
            return rec

        await _update_soon(rt.store, job_id, start)

    async def get_job_status(self, job_id: str) -> JobStatus:
        rt = self._rt()
        rec = rt.store.kv_get(_NS, job_id)
        if rec is None or rec.get("started_at") is None:
            raise LookupError(f"job {job_id} not found")
        return status_of(job_id, rec, rt.clock.now())

    def complete_job(self, job_id: str) -> None:
        """Finishes a job early so callers do not wait for its full duration."""
        rt = self._rt()
        now = rt.clock.now()

        def complete(rec: dict[str, Any] | None) -> dict[str, Any]:
            if rec is None or rec.get("started_at") is None:
                raise LookupError(f"job {job_id} not found")
            rec = dict(rec)
            if rec.get("completed_at") is None:
                rec["completed_at"] = now
            return rec

        rt.store.kv_update(_NS, job_id, complete)

    def describe_job(self, job_id: str) -> JobStatus | None:
        rt = self._rt()
        rec = rt.store.kv_get(_NS, job_id)
        if rec is None or rec.get("started_at") is None:
            return None
        return status_of(job_id, rec, rt.clock.now())


def status_of(job_id: str, rec: dict[str, Any], now: float) -> JobStatus:
    elapsed = now - rec["started_at"]
    duration = rec.get("duration") or FAKE_JOB_DURATION_SECONDS
    if rec.get("completed_at") is not None:
        return JobStatus(job_id, JobState.SUCCEEDED, f"artifact for {job_id}")
    if elapsed >= duration:
        if rec.get("fails"):
            return JobStatus(job_id, JobState.FAILED)
        return JobStatus(job_id, JobState.SUCCEEDED, f"artifact for {job_id}")
    if elapsed >= min(RUNNING_AFTER_SECONDS, duration / 3):
        return JobStatus(job_id, JobState.RUNNING)
    return JobStatus(job_id, JobState.QUEUED)
