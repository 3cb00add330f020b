"""Small probes behind bench/PROFILE.md rounds 8 and 9: where a sequential flow's CPU goes by
thread, what a hand-off between two threads costs on this machine, pinned or not, and what
each SQL statement of a concurrent drain costs.

    python -m bench.probes split [--n 2000]      # dex: the start and the drive, per flow
    python -m bench.probes pingpong [--n 3000]   # no dex: one thread, then two taking turns
    taskset -c 1 python -m bench.probes split     # the same on one CPU
    python -m bench.probes statements [--n 5000] # dex: a drain's statements, CPU µs each

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


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.probes", description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=["split", "pingpong", "statements"])
    ap.add_argument("--n", type=int, default=None,
                    help="flows (split, 2000; statements, 5000) or pairs of turns (pingpong, 3000)")
    args = ap.parse_args()
    if args.n is not None and args.n < 1:
        ap.error("--n must be at least 1")
    if args.probe == "split":
        out = split(args.n or 2000)
    elif args.probe == "pingpong":
        out = pingpong(args.n or 3000)
    else:
        out = statements(args.n or 5000)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
