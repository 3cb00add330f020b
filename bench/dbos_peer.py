"""The DBOS Transact peer (optional extra `pip install -e '.[bench]'`): the same workloads on a
SQLite system database with the same file settings as dex (WAL, synchronous=NORMAL).

Each function runs in its own child process (DBOS is a process-wide singleton).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, fresh_db, peak_rss_mib, percentile


def available() -> tuple[bool, str]:
    try:
        from importlib.metadata import version

        import dbos  # noqa: F401

        return True, version("dbos")
    except Exception as exc:  # ImportError, or a broken install
        return False, f"{type(exc).__name__}: {exc}"


def _launch(db: str) -> Any:
    import logging

    import sqlalchemy as sa

    @sa.event.listens_for(sa.engine.Engine, "connect")
    def _same_settings(dbapi_conn: Any, _record: Any) -> None:  # every pooled connection
        if isinstance(dbapi_conn, sqlite3.Connection):
            dbapi_conn.execute("PRAGMA journal_mode = WAL")
            dbapi_conn.execute("PRAGMA synchronous = NORMAL")

    from dbos import DBOS

    fresh_db(Path(db))
    DBOS(config={"name": "dexbench", "system_database_url": f"sqlite:///{db}", "run_admin_server": False,
                 "log_level": "WARNING"})
    logging.getLogger("dbos").setLevel(logging.WARNING)
    return DBOS


def _three_steps(DBOS: Any) -> Any:
    """The ThreeStepFlow arithmetic as a DBOS workflow of three sync steps (registered once per
    process: each scenario runs in its own)."""

    @DBOS.step()
    def first(x: int) -> int:
        return x + 1

    @DBOS.step()
    def second(x: int) -> int:
        return x * 2

    @DBOS.step()
    def third(x: int) -> int:
        return x + 3

    @DBOS.workflow()
    def three(x: int) -> int:
        return third(second(first(x)))

    return three


def dbos_throughput(db: str, n: int) -> dict[str, Any]:
    """N three-step workflows one after another (the ThreeStepFlow arithmetic)."""
    DBOS = _launch(db)

    three = _three_steps(DBOS)

    from dbos import SetWorkflowID

    DBOS.launch()
    called: dict[str, float] = {}
    try:
        warm = 20
        for i in range(warm):
            three(i)
        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        for i in range(n):
            wf = f"tp-{i}"
            called[wf] = time.time() * 1000
            with SetWorkflowID(wf):
                assert three(i) == 2 * (i + 1) + 3
        wall = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
    finally:
        DBOS.destroy()
    conn = sqlite3.connect(db)
    # workflow_status.created_at is rounded to the second: the first step counts from the call.
    created = called
    lat: list[float] = []
    ops: dict[str, list[int]] = {}
    for wf, _fid, done in conn.execute(
            "SELECT workflow_uuid, function_id, completed_at_epoch_ms FROM operation_outputs ORDER BY workflow_uuid, "
            "function_id"):
        if wf in created:
            ops.setdefault(wf, []).append(done)
    for wf, times in ops.items():
        prev = created[wf]
        for t in times:
            lat.append(float(t - prev))
            prev = t
    conn.close()
    return {"flows": n, "wall_s": wall, "flows_per_s": n / wall, "cpu_s": cpu,
            "step_latency_mean_ms": sum(lat) / len(lat) if lat else None,
            "step_latency_p99_ms": percentile(lat, 99) if lat else None}


_JOBS: dict[str, float] = {}


def dbos_pollers(db: str, n: int, poll_s: float = 0.5, job_s: float = 3.0) -> dict[str, Any]:
    """n polling workflows at once: a step starts the job, a step reads its status each round,
    a stream message on each status change, a durable sleep between polls. The simulated job
    lives in memory (DBOS has no heartbeat; every round already writes a step checkpoint)."""
    DBOS = _launch(db)

    @DBOS.step()
    async def start_job(job_id: str) -> None:
        _JOBS.setdefault(job_id, time.time())

    @DBOS.step()
    async def job_status(job_id: str) -> str:
        elapsed = time.time() - _JOBS[job_id]
        if elapsed >= job_s:
            return "SUCCEEDED"
        return "RUNNING" if elapsed >= min(2.0, job_s / 3) else "QUEUED"

    @DBOS.workflow()
    async def await_job(job_id: str) -> str:
        await start_job(job_id)
        reported = None
        while True:
            state = await job_status(job_id)
            if state == "SUCCEEDED":
                return f"artifact for {job_id}"
            if state != reported:
                await DBOS.write_stream_async("JobProgress", state)
                reported = state
            await DBOS.sleep_async(poll_s)

    async def go() -> tuple[float, float, list[str]]:
        t0 = time.perf_counter()
        handles = [await DBOS.start_workflow_async(await_job, f"job-{i}") for i in range(n)]
        t_sub = time.perf_counter()
        results = await asyncio.gather(*(h.get_result() for h in handles))
        return t_sub - t0, time.perf_counter() - t0, results

    DBOS.launch()
    try:
        cpu0 = cpu_seconds()
        submit, wall, results = asyncio.run(go())
        cpu = cpu_seconds() - cpu0
    finally:
        DBOS.destroy()
    ok = sum(1 for r in results if r.startswith("artifact"))
    return {"flows": n, "ideal_s": job_s, "submit_s": submit, "wall_s": wall, "ratio_total": wall / job_s,
            "cpu_s": cpu, "peak_rss_mib": peak_rss_mib(), "completed": ok}


def dbos_concurrent(db: str, n: int) -> dict[str, Any]:
    """N three-step workflows (sync steps, as ThreeStepFlow's) all started before any result is
    awaited: `DBOS.start_workflow` for each (its thread-pool executor runs them), then every
    handle's result."""
    DBOS = _launch(db)

    three = _three_steps(DBOS)

    DBOS.launch()
    try:
        for i in range(20):  # warm-up, not counted
            three(i)
        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        handles = [DBOS.start_workflow(three, i) for i in range(n)]
        t_sub = time.perf_counter()
        ok = sum(1 for i, h in enumerate(handles) if h.get_result() == 2 * (i + 1) + 3)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
    finally:
        DBOS.destroy()
    out = {"flows": n, "submit_s": t_sub - t0, "wall_s": wall, "flows_per_s": n / wall, "cpu_s": cpu,
           "cpu_ms_per_flow": cpu * 1000 / n, "peak_rss_mib": peak_rss_mib(), "completed": ok}
    if ok != n:
        out["error"] = f"only {ok}/{n} workflows returned the right result"
    return out
