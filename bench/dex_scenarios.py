"""The dex side of every scenario. Each function runs in a fresh child process
(`bench.child`) and returns a JSON-able dict; `bench.run` compares and reports."""

from __future__ import annotations

import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, fresh_db, peak_rss_mib, percentile
from dexcli.engine.process import tune_gc


def _engine(db: str, clock: Any = None, flows: list[Any] | None = None) -> Any:
    from dexcli.builder import build_engine
    from dexcli.cli.loader import load_ref
    from dexcli.engine.clock import Clock
    from dexcli.sdk.registry import Registry
    from dexcli.store import Store

    store = Store(db)
    clock = clock or Clock()
    return build_engine(store, flows=Registry(flows or [], allow_async_handlers=True), clock=clock, loader=load_ref)


# ---------------------------------------------------------------------------------- 1 -----
def _three_steps(durability: str) -> Any:
    """ThreeStepFlow, or (ASYNC) the same three steps with execute_durability=ASYNC."""
    if durability == "ASYNC":
        from bench.async_steps import ThreeAsyncSteps
        return ThreeAsyncSteps()
    from dexcli_flows.three_steps import ThreeStepFlow
    return ThreeStepFlow()


def throughput(db: str, n: int, durability: str = "SYNC") -> dict[str, Any]:
    """N ThreeStepFlow runs one after another, real time, SYNC durability (the default), or the
    same steps with execute_durability=ASYNC."""
    from dexcli.engine.clock import run as run_on_clock

    fresh_db(Path(db))
    engine = _engine(db)
    flow = _three_steps(durability)
    warm = min(20, n)
    ids = [f"tp-{i}" for i in range(n + warm)]

    async def go(batch: list[str], offset: int) -> None:
        for i, fid in enumerate(batch):
            engine.start_flow(flow, fid, offset + i, lease=True)  # as `dex run`: the first attempt leased at start
            await engine.drive_async([fid], until_idle=True, release=False)

    run_on_clock(lambda: go(ids[:warm], 0), engine.clock)  # imports, caches, first pages
    tune_gc()  # what `dex worker` does for a process that runs many flows
    commits0, trans0, cpu0 = engine.store.commits, engine.activity(running=False).transitions, cpu_seconds()
    commit_s0, statements0 = engine.store.commit_seconds, engine.store.statements
    t0 = time.perf_counter()
    run_on_clock(lambda: go(ids[warm:], warm), engine.clock)
    wall = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    commits = engine.store.commits - commits0
    statements = engine.store.statements - statements0
    commit_us = (engine.store.commit_seconds - commit_s0) * 1e6 / max(1, commits)
    handoff_us = run_on_clock(_handoffs, engine.clock)
    transitions = engine.activity(running=False).transitions - trans0
    conn = sqlite3.connect(db)
    bad = conn.execute("SELECT COUNT(*) FROM flows WHERE status != 'COMPLETED'").fetchone()[0]
    rows = conn.execute(
        "SELECT s.end_time - s.scheduled_at FROM steps s WHERE s.flow_id IN "
        f"(SELECT flow_id FROM flows WHERE flow_id NOT IN ({','.join('?' * warm)}))", ids[:warm]
    ).fetchall()
    conn.close()
    lat = [r[0] * 1000 for r in rows]
    return {
        "flows": n, "wall_s": wall, "flows_per_s": n / wall, "cpu_s": cpu,
        "step_latency_mean_ms": sum(lat) / len(lat), "step_latency_p99_ms": percentile(lat, 99),
        "commits": commits, "transitions": transitions, "flow_starts": n,
        "commits_per_transition": commits / max(1, transitions),
        "commits_per_transition_incl_start": commits / max(1, transitions + n),
        "statements": statements, "statements_per_transition": statements / max(1, transitions),
        "not_completed": bad, "commit_us": commit_us, "handoff_us": handoff_us,
    }


def wal_pages(db: str, n: int = 300) -> dict[str, Any]:
    """WAL pages each commit of a sequential ThreeStepFlow writes, by the commit's place in the
    flow: its start, a step transition (a step completes and its next step is leased), and the
    last step (which also closes the flow). Counted from the -wal file's growth, with
    checkpoints off: the size is read as each COMMIT begins, so each difference is the commit
    before it."""
    import os

    from dexcli.engine.clock import run as run_on_clock

    fresh_db(Path(db))
    engine = _engine(db)
    flow = _three_steps("SYNC")

    async def go(ids: list[str]) -> None:
        for i, fid in enumerate(ids):
            engine.start_flow(flow, fid, i, lease=True)
            await engine.drive_async([fid], until_idle=True, release=False)

    run_on_clock(lambda: go([f"warm-{i}" for i in range(50)]), engine.clock)
    conn = engine.store._conn
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    wal, sizes, statements = f"{db}-wal", [], [0]
    count = {"n": 0}

    def trace(sql: str) -> None:
        count["n"] += 1
        if sql == "COMMIT":
            sizes.append(os.path.getsize(wal) if os.path.exists(wal) else 0)
            statements.append(count["n"])

    conn.set_trace_callback(trace)
    run_on_clock(lambda: go([f"p-{i}" for i in range(n)]), engine.clock)
    conn.execute("BEGIN IMMEDIATE")  # one more COMMIT: the last one's size is read too
    conn.execute("COMMIT")
    conn.set_trace_callback(None)
    frames = [(b - a) / (page + 24) for a, b in zip(sizes, sizes[1:], strict=False)]
    per_commit = [statements[i + 1] - statements[i] - 2 for i in range(len(frames))]  # BEGIN, COMMIT not counted
    kinds = {"start": frames[0::4], "step transition": frames[1::4] + frames[2::4], "last step + close": frames[3::4]}
    stmts = {"start": per_commit[0::4], "step transition": per_commit[1::4] + per_commit[2::4],
             "last step + close": per_commit[3::4]}
    engine.store.close()
    return {"flows": n, "pages": {k: sum(v) / len(v) for k, v in kinds.items()},
            "statements": {k: sum(v) / len(v) for k, v in stmts.items()}}


async def _handoffs(n: int = 2000) -> float:
    """The median round trip of one call handed to a handler thread and its result taken back
    on the loop, one at a time (what a sync step costs on top of its own code)."""
    import asyncio

    loop: Any = asyncio.get_running_loop()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await loop.run_in_thread(int)
        times.append(time.perf_counter() - t0)
    return percentile(times, 50) * 1e6


def sqlite_raw(db: str, seconds: float = 2.0) -> dict[str, Any]:
    """Single-row INSERT transactions (BEGIN IMMEDIATE; INSERT; COMMIT), WAL + synchronous=NORMAL."""
    fresh_db(Path(db))
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while True:
        for _ in range(200):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t (v) VALUES (?)", ("x" * 32,))
            conn.execute("COMMIT")
        n += 200
        if time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - t0
    conn.close()
    return {"commits": n, "wall_s": wall, "commits_per_s": n / wall}


# ---------------------------------------------------------------------------------- 2 -----
FAST_POLL_INTERVAL = timedelta(seconds=0.5)  # the pollers scenario (a)
FAST_JOB_SECONDS = 3.0


def pollers(db: str, n: int, kind: str, time_skip: bool = False) -> dict[str, Any]:
    """n polling flows at once in one process, real time.

    Both kinds run the seed's PollingFlow (`flows/polling.py`). kind "fast" polls every 0.5 s
    with jobs done at 3 s; "seed" keeps the seed's constants (poll 2 s, job done at 6 s). Each
    scenario runs in its own child process, so setting the module's POLL_INTERVAL here changes
    nothing else. time_skip (smoke tests only) jumps over idle waits, so timings are
    meaningless but every code path runs in a blink.
    """
    import asyncio

    from dexcli import AsyncClient
    from dexcli.engine.clock import Clock
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.host import StoreHost
    from dexcli_flows.job_service import FAKE_JOB_DURATION_SECONDS, FakeJobService

    fresh_db(Path(db))
    import dexcli_flows.polling as polling

    if kind == "fast":
        polling.POLL_INTERVAL = FAST_POLL_INTERVAL
        duration = FAST_JOB_SECONDS
    else:
        duration = FAKE_JOB_DURATION_SECONDS
    flow = polling.PollingFlow()
    engine = _engine(db, Clock(auto_advance=True) if time_skip else None, flows=[flow])
    jobs = FakeJobService(StoreHost(engine.store, engine.clock))
    ids = [f"poll-{i}" for i in range(n)]
    if kind == "fast":
        for fid in ids:  # job properties are set before the flows start (not timed)
            jobs.configure_job(fid, duration_seconds=duration)
    client = AsyncClient(engine=engine)
    engine.definitions.prepare()  # what a worker does at start-up (dexcli.Worker)
    delays: list[float] = []
    engine._outputs.delays = delays  # how long each heartbeat/Stream unit waited for its commit
    tune_gc()  # what `dex worker` does for a process that runs many flows
    rss_before = peak_rss_mib()
    cpu0, commits0 = cpu_seconds(), engine.store.commits
    marks: dict[str, float] = {}

    closed0 = engine.activity(running=False).flows_closed

    async def go() -> None:
        marks["t0"] = time.perf_counter()
        # A worker runs while a client starts the flows the way async code starts many:
        # concurrently, so the starts share one commit (and the worker leases them in it).
        worker = asyncio.ensure_future(engine.drive_async(
            None, until_idle=False, until=lambda: engine.activity(running=False).flows_closed - closed0 >= n, poll=0.5,
            release=False))
        await asyncio.sleep(0)
        await asyncio.gather(*(client.start_flow(flow, fid, None) for fid in ids))
        marks["started"] = time.perf_counter()
        await worker

    run_on_clock(go, engine.clock)
    t_end = time.perf_counter()
    t0, t_started = marks["t0"], marks["started"]
    cpu = cpu_seconds() - cpu0
    conn = sqlite3.connect(db)
    status = dict(conn.execute("SELECT status, COUNT(*) FROM flows GROUP BY status").fetchall())
    hb, sw = conn.execute("SELECT COALESCE(SUM(heartbeats),0), COALESCE(SUM(stream_writes),0) FROM attempts").fetchone()
    timeouts = conn.execute(
        "SELECT COUNT(*) FROM attempts WHERE outcome IN ('TIMED_OUT','LOST')").fetchone()[0]
    hb_timeouts = conn.execute(
        "SELECT COUNT(*) FROM attempts WHERE outcome IN ('TIMED_OUT','LOST') AND error_type = 'Heartbeat'"
    ).fetchone()[0]
    last_close = conn.execute("SELECT MAX(close_time) - MIN(start_time) FROM flows").fetchone()[0]
    conn.close()
    run_s = t_end - t_started
    total = t_end - t0
    return {
        "flows": n, "kind": kind, "ideal_s": duration, "submit_s": t_started - t0, "run_s": run_s,
        "wall_s": total, "ratio_total": total / duration, "ratio_run": run_s / duration,
        "db_span_s": last_close, "cpu_s": cpu, "peak_rss_mib": peak_rss_mib(),
        "rss_before_mib": rss_before, "statuses": status, "heartbeats": hb, "stream_writes": sw,
        "heartbeat_writes_per_s": (hb + sw) / total,
        "flush_commits": engine._commits.flushes,
        "commits": engine.store.commits - commits0, "commits_per_s": (engine.store.commits - commits0) / total,
        "timeouts": timeouts, "heartbeat_timeouts": hb_timeouts,
        "output_commit_delay_ms": {"median": percentile(delays or [0.0], 50) * 1000,
                                   "p99": percentile(delays or [0.0], 99) * 1000,
                                   "max": max(delays, default=0.0) * 1000, "units": len(delays)},
    }


# ---------------------------------------------------------------------------------- 3 -----
def virtual_timeout(db: str) -> dict[str, Any]:
    """The ten-minute MAX_JOB_WAIT scenario on virtual time: a 15-minute job, AwaitJob hits
    StartToClose at 10 min, RecordJobWaitFailure fails the flow."""
    from dexcli.engine.host import StoreHost
    from dexcli.testing import DexTestEnv
    from dexcli_flows.job_service import FakeJobService
    from dexcli_flows.polling import PollingFlow

    fresh_db(Path(db))
    t_setup = time.perf_counter()
    with DexTestEnv(db) as env:
        jobs = FakeJobService(StoreHost(env.store, env.clock))
        flow = PollingFlow(jobs)
        jobs.configure_job("slow-job", duration_seconds=15 * 60)
        t0 = time.perf_counter()
        result = env.run(flow, flow_id="slow-job")
        wall = time.perf_counter() - t0
        row = env.store.get_flow("slow-job")
        assert row is not None
        assert row.close_time is not None
        virtual = row.close_time - row.start_time
        attempts = env.store.attempts_of("slow-job")
    timeouts = [a.error_type for a in attempts if a.outcome.value == "TIMED_OUT"]
    status = result.status.name
    out: dict[str, Any] = {"wall_s": wall, "setup_s": t0 - t_setup, "virtual_s": virtual,
                           "speedup": virtual / wall, "status": status, "timeouts": timeouts}
    if "StartToClose" not in timeouts or status != "FAILED":
        out["error"] = f"expected StartToClose then FAILED, got {timeouts} and {status}"
    return out


# ---------------------------------------------------------------------------------- 4 -----
def make_big_db(db: str, n: int) -> dict[str, Any]:
    """A database of n finished ThreeStepFlow runs: one real run through the engine (virtual
    time), then its rows cloned n-1 times in one transaction (ids and times shifted)."""
    from dexcli.testing import DexTestEnv
    from dexcli_flows.three_steps import ThreeStepFlow

    fresh_db(Path(db))
    t0 = time.perf_counter()
    with DexTestEnv(db, start=1_767_225_600.0) as env:
        env.run(ThreeStepFlow(), input=1, flow_id="tpl")
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "CREATE TEMP TABLE seq AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
        "SELECT i FROM c", (n - 1,))
    fid = "'flow-' || printf('%06d', seq.i)"
    shift = "seq.i * 7.0"
    conn.execute(
        f"INSERT INTO flows (flow_id, run_id, flow_type, flow_ref, status, input, request_id, start_time, close_time,"
        f" error_type, error_message, graceful, completions, num) SELECT {fid}, run_id || '-' || seq.i, flow_type,"
        f" flow_ref, status, input, request_id || '-' || seq.i, start_time + {shift}, close_time + {shift},"
        f" error_type, error_message, graceful, completions, num + seq.i FROM flows, seq WHERE flows.flow_id = 'tpl'")
    cols = [r[1] for r in conn.execute("PRAGMA table_info(steps)")]
    times = {"scheduled_at", "first_attempt_at", "next_attempt_at", "attempt_started_at", "last_heartbeat_time",
             "heartbeat_deadline", "attempt_deadline", "total_deadline", "end_time"}
    sel = ", ".join(fid if c == "flow_id" else (f"{c} + {shift}" if c in times else c) for c in cols)
    conn.execute(f"INSERT INTO steps ({', '.join(cols)}) SELECT {sel} FROM steps, seq WHERE steps.flow_id = 'tpl'")
    cols = [r[1] for r in conn.execute("PRAGMA table_info(ended_attempts)")]
    sel = ", ".join(fid if c == "flow_id" else (f"{c} + {shift}" if c in ("start_time", "end_time") else c)
                    for c in cols)
    conn.execute(f"INSERT INTO ended_attempts ({', '.join(cols)}) SELECT {sel} FROM ended_attempts, seq "
                 "WHERE ended_attempts.flow_id = 'tpl'")
    conn.execute(f"INSERT INTO history (seq, flow_id, event_time, type, payload) SELECT history.seq + (seq.i << 24), "
                 f"{fid}, event_time + {shift}, type, payload FROM history, seq WHERE history.flow_id = 'tpl' "
                 "ORDER BY seq.i, history.seq")
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    count = conn.execute("SELECT COUNT(*) FROM flows").fetchone()[0]
    conn.close()
    return {"flows": count, "build_s": time.perf_counter() - t0, "size_mib": Path(db).stat().st_size / 2**20,
            "sample_id": f"flow-{n // 2:06d}"}


# ---------------------------------------------------------------------------------- 5 -----
def recovery_holder(db: str, n: int, ready_file: str) -> None:
    """Start n PollingFlows with hour-long jobs and run them until killed (SIGKILL)."""
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.host import StoreHost
    from dexcli_flows.job_service import FakeJobService
    from dexcli_flows.polling import PollingFlow

    fresh_db(Path(db))
    flow = PollingFlow()
    engine = _engine(db, flows=[flow])
    jobs = FakeJobService(StoreHost(engine.store, engine.clock))
    for i in range(n):
        jobs.configure_job(f"rec-{i}", duration_seconds=3600)
        engine.start_flow(flow, f"rec-{i}", flow_ref="name:polling")
    Path(ready_file).write_text("started")

    async def go() -> None:
        await engine.drive_async(None, until_idle=False, release=False)

    run_on_clock(go, engine.clock)


def recovery_worker(db: str) -> None:
    """The fallback `dex worker`: drive every flow in the database until killed."""
    from dexcli.engine.clock import run as run_on_clock

    engine = _engine(db)
    tune_gc()  # as `dex worker` does

    async def go() -> None:
        await engine.drive_async(None, until_idle=False, release=False)

    run_on_clock(go, engine.clock)
