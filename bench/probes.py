"""Small probes behind bench/PROFILE.md rounds 8 to 11: where a sequential flow's CPU goes by
thread and its wall time by stage, what a hand-off between two threads costs on this machine,
pinned or not, what each SQL statement of a concurrent drain costs, which threads a drain's
CPU is spent on, and when each phase of the pollers row happens (round 11).

    python -m bench.probes split [--n 2000]      # dex: the start and the drive, per flow
    python -m bench.probes stages [--n 2000] [--durability ASYNC]  # dex: a flow's wall, stage by stage
    python -m bench.probes pingpong [--n 3000]   # no dex: one thread, then two taking turns
    taskset -c 1 python -m bench.probes split     # the same on one CPU
    python -m bench.probes statements [--n 5000] # dex: a drain's statements, CPU µs each
    python -m bench.probes threads [--n 10000]   # dex: a drain's CPU by thread (Linux /proc)
    python -m bench.probes timeline [--n 1000] [--kind seed]  # dex: the pollers row, phase by phase

Each prints one line of JSON. They are measurements, not targets: compare pinned with unpinned
runs made in the same minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any


def split(n: int) -> dict[str, Any]:
    """N sequential ThreeStepFlows as the throughput scenario runs them (`start_flow` with the
    first attempt leased, then `drive_async` until idle), timing each half per flow: wall and the
    calling thread's CPU. The handler thread's share is the process's CPU less the caller's."""
    from bench import dex_scenarios as d
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.process import tune_gc

    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "split.db"
    engine = d._engine(str(db))
    flow = d._three_steps("SYNC")
    start_wall: list[float] = []
    start_cpu: list[float] = []
    drive_wall: list[float] = []
    drive_cpu: list[float] = []

    async def go(count: int, offset: int) -> None:
        for i in range(count):
            fid = f"p-{offset + i}"
            t0, c0 = time.perf_counter(), time.thread_time()
            engine.start_flow(flow, fid, i, lease=True)
            t1, c1 = time.perf_counter(), time.thread_time()
            await engine.drive_async([fid], until_idle=True, release=False)
            t2, c2 = time.perf_counter(), time.thread_time()
            start_wall.append(t1 - t0)
            start_cpu.append(c1 - c0)
            drive_wall.append(t2 - t1)
            drive_cpu.append(c2 - c1)

    run_on_clock(lambda: go(50, 0), engine.clock)  # imports, caches, first pages
    for kept in (start_wall, start_cpu, drive_wall, drive_cpu):
        kept.clear()
    tune_gc()
    main0, proc0, wall0 = time.thread_time(), time.process_time(), time.perf_counter()
    run_on_clock(lambda: go(n, 100), engine.clock)
    wall = time.perf_counter() - wall0
    main_us = (time.thread_time() - main0) * 1e6 / n
    proc_us = (time.process_time() - proc0) * 1e6 / n
    engine.store.close()
    with sqlite3.connect(db) as conn:
        not_completed = conn.execute("SELECT COUNT(*) FROM flows WHERE status != 'COMPLETED'").fetchone()[0]

    def med(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1e6, 1)

    return {"probe": "split", "flows": n, "not_completed": not_completed, "flows_per_s": round(n / wall),
            "cpus": sorted(os.sched_getaffinity(0)),
            "cpu_us_per_flow": round(proc_us, 1), "caller_cpu_us": round(main_us, 1),
            "handler_cpu_us": round(proc_us - main_us, 1), "start_wall_us": med(start_wall),
            "start_cpu_us": med(start_cpu), "drive_wall_us": med(drive_wall), "drive_caller_cpu_us": med(drive_cpu)}


def stages(n: int, durability: str = "SYNC") -> dict[str, Any]:
    """N sequential ThreeStepFlows run as `split` runs them, with each handler's entry and exit
    stamped (bench.stage_steps): the median wall time of each stage of a flow, from its
    `start_flow` to its drive's end. The stage from one handler's exit to the next one's entry
    is that step's transition: judged, applied, committed (under SYNC) and the next attempt
    begun, on the handler's thread."""
    from bench import stage_steps
    from bench.dex_scenarios import _engine
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.process import tune_gc

    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "stages.db"
    engine = _engine(str(db))
    flow = stage_steps.StampedSteps(durability)
    marks = stage_steps.MARKS

    async def go(count: int, offset: int) -> None:
        for i in range(count):
            fid = f"s-{offset + i}"
            marks.append(("start", time.perf_counter()))
            engine.start_flow(flow, fid, i, lease=True)
            marks.append(("drive", time.perf_counter()))
            await engine.drive_async([fid], until_idle=True, release=False)
            marks.append(("end", time.perf_counter()))

    run_on_clock(lambda: go(50, 0), engine.clock)  # imports, caches, first pages
    marks.clear()
    tune_gc()
    wall0 = time.perf_counter()
    run_on_clock(lambda: go(n, 100), engine.clock)
    wall = time.perf_counter() - wall0
    engine.store.close()
    with sqlite3.connect(db) as conn:
        not_completed = conn.execute("SELECT COUNT(*) FROM flows WHERE status != 'COMPLETED'").fetchone()[0]
    spans: dict[str, list[float]] = {}
    for (a, ta), (b, tb) in zip(marks, marks[1:], strict=False):
        if a != "end":
            spans.setdefault(f"{a} {b}", []).append(tb - ta)
    names = {"start drive": "start_flow", "drive First>": "drive to First", "First> First<": "First's handler",
             "First< Second>": "First's transition", "Second> Second<": "Second's handler",
             "Second< Third>": "Second's transition", "Third> Third<": "Third's handler",
             "Third< end": "Third's transition, close, drive's end"}
    median_us = {names.get(k, k): round(statistics.median(v) * 1e6, 1) for k, v in spans.items()}
    return {"probe": "stages", "flows": n, "durability": durability, "not_completed": not_completed,
            "flows_per_s": round(n / wall), "cpus": sorted(os.sched_getaffinity(0)),
            "median_us": median_us, "sum_of_medians_us": round(sum(median_us.values()), 1)}


def pingpong(n: int) -> dict[str, Any]:
    """The same fixed turn (a write transaction of two statements, then 3,000 iterations of
    Python) done N times a side: by one thread, then by two threads taking turns (a Lock
    released by one, acquired by the other). µs per pair of turns, wall and process CPU."""
    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "pingpong.db"
    conn = sqlite3.connect(db, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")

    def turn(i: int) -> int:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", (i, "x" * 100))
        conn.execute("UPDATE t SET v = ? WHERE k = ?", ("y" * 100, i))
        conn.execute("COMMIT")
        s = 0
        for j in range(3000):
            s += j * j
        return s

    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        turn(4 * i)
        turn(4 * i + 1)
    one = ((time.perf_counter() - t0) * 1e6 / n, (time.process_time() - c0) * 1e6 / n)
    mine, theirs = threading.Lock(), threading.Lock()
    mine.acquire()
    theirs.acquire()

    def other() -> None:
        for i in range(n):
            mine.acquire()
            turn(4 * i + 3)
            theirs.release()

    thread = threading.Thread(target=other)
    thread.start()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        turn(4 * i + 2)
        mine.release()
        theirs.acquire()
    thread.join()
    two = ((time.perf_counter() - t0) * 1e6 / n, (time.process_time() - c0) * 1e6 / n)
    conn.close()
    return {"probe": "pingpong", "pairs": n, "cpus": sorted(os.sched_getaffinity(0)),
            "one_thread_wall_us": round(one[0], 1), "one_thread_cpu_us": round(one[1], 1),
            "two_threads_wall_us": round(two[0], 1), "two_threads_cpu_us": round(two[1], 1)}


def statements(n: int) -> dict[str, Any]:
    """N ThreeStepFlows started at once, then drained by a Worker (the concurrent scenario),
    with every statement's CPU time (the calling thread's, so a wait for the GIL does not count)
    summed by its SQL text; each of the costliest is also compiled once more with EXPLAIN to
    count the temporary B-trees (OpenEphemeral) its program opens."""
    from bench.concurrent import concurrent_start
    from dexcli import Worker
    from dexcli.sdk.registry import Registry
    from dexcli.store.connection import Connection
    from dexcli_flows.three_steps import ThreeStepFlow

    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "statements.db"
    concurrent_start(str(db), n)
    spent: dict[str, list[Any]] = {}  # sql: [count, CPU seconds, the last parameters]
    execute = Connection.execute
    clock = time.thread_time

    def timed(self: Connection, sql: str, parameters: Any = ()) -> Any:
        c0 = clock()
        try:
            return execute(self, sql, parameters)
        finally:
            entry = spent.setdefault(sql, [0, 0.0, parameters])
            entry[0] += 1
            entry[1] += clock() - c0
            entry[2] = parameters

    Connection.execute = timed  # type: ignore[method-assign]
    try:
        with Worker(Registry([ThreeStepFlow()]), db=str(db)) as worker:
            worker.run(until_idle=True)
    finally:
        Connection.execute = execute  # type: ignore[method-assign]
    conn = sqlite3.connect(db)
    total = sum(e[1] for e in spent.values())
    top = []
    for sql, (count, cpu, params) in sorted(spent.items(), key=lambda kv: -kv[1][1])[:12]:
        try:
            temp = [op[1] for op in conn.execute("EXPLAIN " + sql, params)].count("OpenEphemeral")
        except sqlite3.Error:
            temp = None  # BEGIN, COMMIT, PRAGMA
        top.append({"sql": " ".join(sql.split())[:160], "count": count, "cpu_us_each": round(cpu * 1e6 / count, 1),
                    "temp_btrees": temp})
    conn.close()
    return {"probe": "statements", "flows": n, "cpus": sorted(os.sched_getaffinity(0)),
            "statements": sum(int(e[0]) for e in spent.values()), "sql_cpu_ms_per_flow": round(total * 1e3 / n, 3),
            "top": top}


def _thread_cpu() -> dict[str, tuple[float, int, int]] | None:
    """This process's threads: id -> (CPU seconds, voluntary and involuntary context switches),
    from /proc (None where there is none)."""
    tasks = Path("/proc/self/task")
    if not tasks.is_dir():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in tasks.iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        switches = dict(line.split(":\t") for line in status.splitlines() if "ctxt_switches" in line)
        out[task.name] = ((int(fields[11]) + int(fields[12])) / tick, int(switches["voluntary_ctxt_switches"]),
                          int(switches["nonvoluntary_ctxt_switches"]))
    return out


def threads(n: int) -> dict[str, Any]:
    """N ThreeStepFlows started at once, then drained by a Worker (the concurrent scenario),
    with the CPU each of the worker's threads spent and their context switches, sampled every
    50 ms until the drain ends (a handler thread's figures are its last sample): is the drain
    bound by the loop's thread, or by its handler threads?"""
    from bench.concurrent import concurrent_start
    from dexcli import Worker
    from dexcli.sdk.registry import Registry
    from dexcli_flows.three_steps import ThreeStepFlow

    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "threads.db"
    concurrent_start(str(db), n)
    before = _thread_cpu()
    if before is None:
        return {"probe": "threads", "flows": n, "cpus": sorted(os.sched_getaffinity(0)), "error": "no /proc here"}
    last: dict[str, tuple[float, int, int]] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            last.update(_thread_cpu() or {})

    sampler = threading.Thread(target=sample, daemon=True)
    with Worker(Registry([ThreeStepFlow()]), db=str(db)) as worker:
        loop_thread = str(threading.get_native_id())  # the worker's loop runs on this thread
        sampler.start()
        wall0 = time.perf_counter()
        worker.run(until_idle=True)
        wall = time.perf_counter() - wall0
        last.update(_thread_cpu() or {})
        done.set()
        sampler.join()
    mine = str(sampler.native_id)
    spent = {tid: tuple(a - b for a, b in zip(now, before.get(tid, (0.0, 0, 0)), strict=True))
             for tid, now in last.items() if tid != mine}
    loop_cpu = spent.get(loop_thread, (0.0, 0, 0))[0]
    others = [v for tid, v in spent.items() if tid != loop_thread and v[0] > 0]
    total = loop_cpu + sum(v[0] for v in others)
    return {"probe": "threads", "flows": n, "cpus": sorted(os.sched_getaffinity(0)), "drain_s": round(wall, 3),
            "cpu_s": round(total, 2), "loop_thread_cpu_s": round(loop_cpu, 2),
            "loop_thread_share": round(loop_cpu / total, 3) if total else None,
            "other_threads_cpu_s": round(sum(v[0] for v in others), 2), "other_threads_busy": len(others),
            "voluntary_switches": int(sum(v[1] for v in spent.values())),
            "involuntary_switches": int(sum(v[2] for v in spent.values()))}


def timeline(n: int, kind: str = "fast", time_skip: bool = False) -> dict[str, Any]:
    """The pollers row (`dex_scenarios.pollers`: N PollingFlows started at once while a worker
    runs), then, from the database it leaves, when each flow reached each phase, in seconds from
    the first start (quantiles over the flows): its job started (StartJob's handler), StartJob's
    transition committed (AwaitJob's first poll comes right after), the flow closed. A job is done
    its duration after it started, but AwaitJob sees that only at the first poll after it, on a
    schedule set by its own first poll: `first_poll_lag` (StartJob's commit − its job's start) is
    carried to the flow's close; `seen_after_done` is its close after its job was done, and
    `drift_and_close` the part of that beyond the lag (each poll's sleep begins after its
    heartbeat or Stream write is committed, so a busy round delays every later poll). `time_skip`
    (smoke tests only) jumps over the idle waits: the times then mean nothing."""
    from bench.dex_scenarios import pollers

    db = Path(tempfile.mkdtemp(prefix="dex-probe-")) / "timeline.db"
    run = pollers(str(db), n, kind, time_skip)
    conn = sqlite3.connect(db)
    try:
        t0 = conn.execute("SELECT MIN(start_time) FROM flows").fetchone()[0]
        jobs = {key: json.loads(value)["started_at"] for key, value in conn.execute(
            "SELECT key, value FROM kv WHERE ns = 'polling.jobs'")}
        start_job = dict(conn.execute(
            "SELECT flow_id, end_time FROM steps WHERE step_type = 'StartJob' AND status = 'COMPLETED'").fetchall())
        closed = dict(conn.execute("SELECT flow_id, close_time FROM flows WHERE close_time IS NOT NULL").fetchall())
    finally:
        conn.close()
    ids = [f for f in closed if f in jobs and f in start_job]

    def spread(values: list[float]) -> dict[str, float]:
        xs = sorted(values)
        return {q: round(xs[min(len(xs) - 1, int(len(xs) * f))], 3)
                for q, f in (("min", 0.0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("max", 1.0))} if xs else {}

    duration = run["ideal_s"]
    return {"probe": "timeline", "flows": n, "kind": kind, "cpus": sorted(os.sched_getaffinity(0)),
            "wall_s": round(run["wall_s"], 3), "ratio": round(run["ratio_total"], 3),
            "submit_s": round(run["submit_s"], 3),
            "cpu_s": round(run["cpu_s"], 2), "job_s": duration, "closed": len(ids),
            "job_started": spread([jobs[f] - t0 for f in ids]),
            "start_job_committed": spread([start_job[f] - t0 for f in ids]),
            "closed_at": spread([closed[f] - t0 for f in ids]),
            "first_poll_lag": spread([start_job[f] - jobs[f] for f in ids]),
            "seen_after_done": spread([closed[f] - (jobs[f] + duration) for f in ids]),
            "drift_and_close": spread([closed[f] - (start_job[f] + duration) for f in ids])}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=["split", "stages", "pingpong", "statements", "threads", "timeline"])
    ap.add_argument("--n", type=int, default=None,
                    help="flows (split and stages, 2000; statements, 5000; threads, 10000; timeline, 1000) or pairs "
                         "of turns (pingpong, 3000)")
    ap.add_argument("--durability", choices=["SYNC", "ASYNC"], default="SYNC", help="the steps' (stages)")
    ap.add_argument("--kind", choices=["fast", "seed"], default="fast",
                    help="timeline: fast (poll 0.5 s, 3 s jobs: the 1,000-pollers row) or seed (poll 2 s, 6 s jobs)")
    ap.add_argument("--time-skip", action="store_true",
                    help="timeline: jump idle waits (smoke runs; times mean nothing)")
    args = ap.parse_args()
    if args.n is not None and args.n < 1:
        ap.error("--n must be at least 1")
    if args.probe == "split":
        out = split(args.n or 2000)
    elif args.probe == "stages":
        out = stages(args.n or 2000, args.durability)
    elif args.probe == "pingpong":
        out = pingpong(args.n or 3000)
    elif args.probe == "threads":
        out = threads(args.n or 10000)
    elif args.probe == "timeline":
        out = timeline(args.n or 1000, args.kind, args.time_skip)
    else:
        out = statements(args.n or 5000)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
