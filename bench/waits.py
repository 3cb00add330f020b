"""Issue 12's scenario: flows waiting on `Wait.any_of(decisions.for_one(), Timer.by_duration(1 h))`.

`wait_timers`: N ApprovalFlows (flows/approval.py, expire_after_hours=1) started with one
AsyncClient gather while a worker runs on the real clock, until every wait is committed; then
the clock is switched to time-skip (it jumps whenever the loop would sleep) and the same
engine runs until every flow has expired.
`wait_rpc_latency`: M flows of the same shape waiting; one at a time, `AsyncClient.invoke_rpc`
(approve: publishes to the channel) and the time until that flow's step `execute` starts.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench.common import cpu_seconds, fresh_db, peak_rss_mib, percentile
from dexcli import Context, StepDecision
from dexcli_flows.approval import ApprovalFlow, AwaitDecision, Request

EXECUTE_STARTED: dict[str, float] = {}  # flow id -> perf_counter() when its execute began


class TimedDecision(AwaitDecision):
    """AwaitDecision that notes when its execute starts (the first thing it does)."""

    def execute(self, context: Context, input: Request) -> StepDecision:
        EXECUTE_STARTED[context.flow_id] = time.perf_counter()
        return super().execute(context, input)


class TimedApprovalFlow(ApprovalFlow):
    def __init__(self) -> None:
        self.await_decision = TimedDecision()


def _setup(db: str, flow: Any) -> tuple[Any, Any, dict[str, int]]:
    from dexcli import AsyncClient
    from dexcli.builder import build_engine
    from dexcli.engine.clock import Clock
    from dexcli.sdk.registry import Registry
    from dexcli.store import Store

    fresh_db(Path(db))
    store = Store(db)
    engine = build_engine(store, flows=Registry([flow]), clock=Clock())
    counts = {"waiting": 0, "closed": 0}

    def count(e: Any) -> None:
        if e.type in ("stepWaiting", "flowClosed"):
            counts["waiting" if e.type == "stepWaiting" else "closed"] += 1

    engine.events.listeners.append(count)
    return engine, AsyncClient(engine=engine), counts


def wait_timers(db: str, n: int) -> dict[str, Any]:
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.process import tune_gc

    flow = ApprovalFlow()
    engine, client, counts = _setup(db, flow)
    tune_gc()
    marks: dict[str, float] = {}

    async def go() -> None:
        t0 = time.perf_counter()
        worker = asyncio.ensure_future(engine.drive_async(None, until_idle=False, until=lambda: counts["waiting"] >= n,
                                                  poll=0.2, release=False))
        await asyncio.sleep(0)
        await asyncio.gather(*(client.start_flow(flow, f"w-{i}", Request(f"r{i}", i, expire_after_hours=1))
                               for i in range(n)))
        marks["submitted"] = time.perf_counter() - t0
        await worker
        marks["waiting"] = time.perf_counter() - t0
        marks["rss_waiting"] = peak_rss_mib()
        engine.clock.auto_advance = True  # time-skip from here on: the loop jumps instead of sleeping
        t1, v1 = time.perf_counter(), engine.clock.now()
        await engine.drive_async(None, until_idle=False, until=lambda: counts["closed"] >= n, poll=60, release=False)
        marks["fired"] = time.perf_counter() - t1
        marks["skipped_s"] = engine.clock.now() - v1

    cpu0 = cpu_seconds()
    run_on_clock(go, engine.clock)
    cpu = cpu_seconds() - cpu0
    conn = sqlite3.connect(db)
    outcomes = dict(conn.execute("SELECT json_extract(completions, '$[0].output.status'), COUNT(*) FROM flows "
                                 "GROUP BY 1").fetchall())
    conn.close()
    out = {"flows": n, "submit_s": marks["submitted"], "start_to_waiting_s": marks["waiting"],
           "rss_waiting_mib": marks["rss_waiting"], "fire_s": marks["fired"], "virtual_skipped_s": marks["skipped_s"],
           "peak_rss_mib": peak_rss_mib(), "cpu_s": cpu, "outcomes": outcomes}
    if outcomes != {"expired": n}:
        out["error"] = f"expected {n} expired flows, got {outcomes}"
    return out


def wait_rpc_latency(db: str, n: int) -> dict[str, Any]:
    from dexcli.engine.clock import run as run_on_clock

    flow = TimedApprovalFlow()
    engine, client, counts = _setup(db, flow)
    lat: list[float] = []

    async def go() -> None:
        worker = asyncio.ensure_future(engine.drive_async(None, until_idle=False, until=lambda: counts["closed"] >= n,
                                                  poll=0.05, release=False))
        await asyncio.sleep(0)
        await asyncio.gather(*(client.start_flow(flow, f"a-{i}", Request(f"r{i}", i)) for i in range(n)))
        while counts["waiting"] < n:
            await asyncio.sleep(0.01)
        for i in range(n):
            fid = f"a-{i}"
            t0 = time.perf_counter()
            await client.invoke_rpc(flow.approve, fid, "bench")
            while fid not in EXECUTE_STARTED:  # polls; the latency is the timestamp execute took
                await asyncio.sleep(0.0002)
            lat.append((EXECUTE_STARTED[fid] - t0) * 1000)
        await worker

    run_on_clock(go, engine.clock)
    conn = sqlite3.connect(db)
    approved = conn.execute("SELECT COUNT(*) FROM flows WHERE json_extract(completions, '$[0].output.status') = "
                            "'approved'").fetchone()[0]
    conn.close()
    out = {"rpcs": n, "median_ms": percentile(lat, 50), "p90_ms": percentile(lat, 90), "p99_ms": percentile(lat, 99),
           "min_ms": min(lat), "max_ms": max(lat), "approved": approved}
    if approved != n:
        out["error"] = f"only {approved}/{n} flows approved"
    return out
