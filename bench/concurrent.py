"""Issue 15 item 1: many ThreeStepFlows in flight at once, one worker process.

`concurrent_start` (a client process) starts all N flows with one `AsyncClient` gather (the
starts share one group commit); `concurrent_drain` (a fresh process: CPU and peak RSS are its
own) runs a `dexcli.Worker` on the database until nothing is left to run, as `dex worker
--until-idle` would. Commits are the worker Store's `commits` counter (every BEGIN IMMEDIATE…
COMMIT); transitions are the engine's count of step transitions.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, fresh_db, peak_rss_mib


def concurrent_start(db: str, n: int) -> dict[str, Any]:
    from dexcli import AsyncClient
    from dexcli.builder import build_engine
    from dexcli.engine.clock import Clock
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.sdk.registry import Registry
    from dexcli.store import Store
    from dexcli_flows.three_steps import ThreeStepFlow

    fresh_db(Path(db))
    flow = ThreeStepFlow()
    store = Store(db)
    engine = build_engine(store, flows=Registry([flow]), clock=Clock())
    client = AsyncClient(engine=engine)

    async def go() -> None:
        await asyncio.gather(*(client.start_flow(flow, f"c-{i}", i, flow_ref="name:three-steps") for i in range(n)))

    c0 = store.commits
    t0 = time.perf_counter()
    run_on_clock(go, engine.clock)
    wall = time.perf_counter() - t0
    commits = store.commits - c0
    store.close()
    return {"flows": n, "start_s": wall, "start_commits": commits}


def concurrent_drain(db: str, n: int) -> dict[str, Any]:
    from dexcli import Worker
    from dexcli.engine.process import tune_gc
    from dexcli.sdk.registry import Registry
    from dexcli_flows.three_steps import ThreeStepFlow

    with Worker(Registry([ThreeStepFlow()]), db=db) as worker:
        engine = worker.engine
        tune_gc()  # what `dex worker` does before it drives
        c0, tr0, cpu0 = engine.store.commits, engine.activity(running=False).transitions, cpu_seconds()
        s0 = engine.store.statements
        t0 = time.perf_counter()
        worker.run(until_idle=True)
        wall = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
        commits, transitions = engine.store.commits - c0, engine.activity(running=False).transitions - tr0
        statements = engine.store.statements - s0
    conn = sqlite3.connect(db)
    done = conn.execute("SELECT COUNT(*) FROM flows WHERE status = 'COMPLETED'").fetchone()[0]
    conn.close()
    out = {"flows": n, "drain_s": wall, "drain_flows_per_s": n / wall, "cpu_s": cpu, "cpu_ms_per_flow": cpu * 1000 / n,
           "peak_rss_mib": peak_rss_mib(), "commits": commits, "transitions": transitions,
           "commits_per_transition": commits / max(1, transitions), "completed": done,
           "statements": statements, "statements_per_transition": statements / max(1, transitions)}
    if done != n:
        out["error"] = f"only {done}/{n} flows completed"
    return out
