"""`python -m bench`: run the performance scenarios, print a table, write bench/RESULTS.md.

Every measurement runs in a fresh child interpreter (`python -m bench.child ...`) so CPU time
and peak RSS belong to that scenario alone; DBOS runs in the same invocation, on the same
kind of SQLite file (WAL, synchronous=NORMAL), so each comparison is a ratio from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import long_feed, report, search
from bench.common import ROOT, child_argv, child_env, run_child, speed_probe_ms, time_cmds

SCENARIOS = ("throughput", "concurrent", "pollers", "waits", "virtual", "cli", "recovery")
OPTIONAL = ("search", "long_feed")  # run only when named in --only (bench/search.py, bench/long_feed.py)

FULL = {"throughput_n": 2000, "dbos_throughput_n": 500, "concurrent_n": 10_000, "dbos_concurrent_n": 2000,
        "pollers_1k": 1000, "dbos_pollers": 500, "pollers_10k": 10000, "waits_n": 10_000, "rpc_n": 200,
        "cli_flows": 100_000, "cli_runs": 15, "recovery_n": 1000, "raw_seconds": 2.0}
QUICK = {"throughput_n": 10, "dbos_throughput_n": 10, "concurrent_n": 20, "dbos_concurrent_n": 10,
         "pollers_1k": 5, "dbos_pollers": 5, "pollers_10k": 10, "waits_n": 10, "rpc_n": 5,
         "cli_flows": 200, "cli_runs": 1, "recovery_n": 5, "raw_seconds": 0.2}


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------ scenarios --
def scenario_throughput(ctx: dict[str, Any]) -> dict[str, Any]:
    w, cfg = ctx["workdir"], ctx["cfg"]
    dex_runs, async_runs, dbos_runs, pinned_runs = [], [], [], []
    cpu = one_cpu()
    for i in range(ctx["repeat"]):  # interleaved: drift of a shared machine hits both alike
        log(f"throughput {i + 1}/{ctx['repeat']}: dex, {cfg['throughput_n']} sequential ThreeStepFlow runs")
        dex_runs.append(run_child("throughput", {"db": str(w / f"throughput-{i}.db"), "n": cfg["throughput_n"]}))
        if cpu is not None:
            log(f"throughput {i + 1}/{ctx['repeat']}: dex, the same with the process on CPU {cpu} alone")
            pinned_runs.append(run_child("throughput", {"db": str(w / f"throughput-pinned-{i}.db"),
                                                        "n": cfg["throughput_n"], "cpu": cpu}))
        log(f"throughput {i + 1}/{ctx['repeat']}: dex, the same with execute_durability=ASYNC")
        async_runs.append(run_child("throughput", {"db": str(w / f"throughput-async-{i}.db"),
                                                   "n": cfg["throughput_n"], "durability": "ASYNC"}))
        if ctx["dbos"]:
            log(f"throughput {i + 1}/{ctx['repeat']}: DBOS, {cfg['dbos_throughput_n']} sequential workflows")
            dbos_runs.append(run_child("dbos_throughput", {"db": str(w / f"dbos-throughput-{i}.sqlite"),
                                                           "n": cfg["dbos_throughput_n"]}))
    out: dict[str, Any] = {"dex": median_run(dex_runs, "flows_per_s"),
                           "dex_async": median_run(async_runs, "flows_per_s")}
    log("throughput: WAL pages per commit")
    out["wal"] = run_child("wal_pages", {"db": str(w / "wal-pages.db"), "n": min(300, cfg["throughput_n"] * 10)})
    log("throughput: raw SQLite single-row commits")
    out["sqlite"] = run_child("sqlite_raw", {"db": str(w / "raw.db"), "seconds": cfg["raw_seconds"]})
    if pinned_runs:
        out["dex_pinned"] = dict(median_run(pinned_runs, "flows_per_s"), cpu=cpu)
        out["pinned_ratio"] = pair_ratios(pinned_runs, dex_runs, "flows_per_s", "flows_per_s")
    if ctx["dbos"]:
        out["dbos"] = median_run(dbos_runs, "flows_per_s")
        out["ratio"] = pair_ratios(dex_runs, dbos_runs, "flows_per_s", "flows_per_s")
        out["async_ratio"] = pair_ratios(async_runs, dbos_runs, "flows_per_s", "flows_per_s")
        if pinned_runs:
            out["pinned_dbos_ratio"] = pair_ratios(pinned_runs, dbos_runs, "flows_per_s", "flows_per_s")
    return out


def one_cpu() -> int | None:
    """A CPU to confine one throughput run to (the highest this process may use), or None where
    there is one CPU or affinity cannot be set."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = os.sched_getaffinity(0)
    return max(cpus) if len(cpus) > 1 else None


def scenario_concurrent(ctx: dict[str, Any]) -> dict[str, Any]:
    w, cfg = ctx["workdir"], ctx["cfg"]
    n, dex_runs, dbos_runs = cfg["concurrent_n"], [], []
    for i in range(ctx["repeat"]):
        db = str(w / f"concurrent-{i}.db")
        log(f"concurrent {i + 1}/{ctx['repeat']}: dex, {n} ThreeStepFlows started at once, one worker process")
        started = run_child("concurrent_start", {"db": db, "n": n})
        run = dict(started) if "error" in started else dict(run_child("concurrent_drain", {"db": db, "n": n}),
                                                                **started)
        if "error" not in run:
            run["flows_per_s"] = n / (run["start_s"] + run["drain_s"])
        dex_runs.append(run)
        if ctx["dbos"]:
            log(f"concurrent {i + 1}/{ctx['repeat']}: DBOS, {cfg['dbos_concurrent_n']} workflows started at once")
            dbos_runs.append(run_child("dbos_concurrent", {"db": str(w / f"dbos-concurrent-{i}.sqlite"),
                                                           "n": cfg["dbos_concurrent_n"]}))
    out: dict[str, Any] = {"dex": median_run(dex_runs, "flows_per_s")}
    if ctx["dbos"]:
        out["dbos"] = median_run(dbos_runs, "flows_per_s")
        out["ratio"] = pair_ratios(dex_runs, dbos_runs, "flows_per_s", "flows_per_s")
        out["drain_ratio"] = pair_ratios(dex_runs, dbos_runs, "drain_flows_per_s", "flows_per_s")
    return out


def scenario_waits(ctx: dict[str, Any]) -> dict[str, Any]:
    w, cfg = ctx["workdir"], ctx["cfg"]
    timers, rpcs = [], []
    for i in range(ctx["repeat"]):
        log(f"waits {i + 1}/{ctx['repeat']}: {cfg['waits_n']} flows waiting on a 1 h timer and a channel")
        timers.append(run_child("wait_timers", {"db": str(w / f"waits-{i}.db"), "n": cfg["waits_n"]}))
        log(f"waits {i + 1}/{ctx['repeat']}: {cfg['rpc_n']} RPCs, invoke_rpc -> execute starts")
        rpcs.append(run_child("wait_rpc_latency", {"db": str(w / f"rpc-{i}.db"), "n": cfg["rpc_n"]}))
    return {"timers": median_run(timers, "fire_s"), "rpc": median_run(rpcs, "median_ms")}


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The median of repeated runs by `key` (this machine is shared and noisy), with every
    run's value kept in `runs` and the spread in `min`/`max`."""
    good = [r for r in runs if "error" not in r]
    if not good:
        return runs[0] if runs else {"error": "not run"}
    mid = sorted(good, key=lambda r: r[key])[len(good) // 2]
    vals = [r[key] for r in good]
    return dict(mid, runs=[round(v, 3) for v in vals], min=min(vals), max=max(vals), key=key,
                failed_runs=len(runs) - len(good))


def pair_ratios(a: list[dict[str, Any]], b: list[dict[str, Any]], key_a: str, key_b: str) -> dict[str, Any]:
    """dex ÷ DBOS for each interleaved pair of runs: median, min, max."""
    rs = sorted(x[key_a] / y[key_b] for x, y in zip(a, b, strict=False)
                if "error" not in x and "error" not in y and y.get(key_b))
    if not rs:
        return {"error": "no pair of runs without an error"}
    return {"median": rs[len(rs) // 2], "min": rs[0], "max": rs[-1], "runs": [round(r, 2) for r in rs]}


def scenario_pollers(ctx: dict[str, Any]) -> dict[str, Any]:
    w, cfg, skip = ctx["workdir"], ctx["cfg"], ctx["quick"]
    out: dict[str, Any] = {}
    log(f"pollers: dex, {cfg['pollers_1k']} fast pollers (poll 0.5 s, job 3 s)")
    out["dex_1k"] = median_run([run_child("pollers", {"db": str(w / f"pollers-1k-{i}.db"), "n": cfg["pollers_1k"],
                                                      "kind": "fast", "time_skip": skip})
                                for i in range(ctx["repeat"])], "wall_s")
    if ctx["dbos"]:
        if skip:
            out["dbos_1k"] = {"error": "skipped in --quick (real-time only)"}
        else:  # one run: it takes ~25 s of real time
            log(f"pollers: DBOS, {cfg['dbos_pollers']} fast pollers")
            out["dbos_1k"] = run_child("dbos_pollers", {"db": str(w / "dbos-pollers.sqlite"),
                                                        "n": cfg["dbos_pollers"]})
    log(f"pollers: dex, {cfg['pollers_10k']} PollingFlow pollers (poll 2 s, job 6 s)")
    out["dex_10k"] = median_run([run_child("pollers", {"db": str(w / f"pollers-10k-{i}.db"), "n": cfg["pollers_10k"],
                                                       "kind": "seed", "time_skip": skip})
                                 for i in range(ctx["repeat"])], "wall_s")
    return out


def scenario_virtual(ctx: dict[str, Any]) -> dict[str, Any]:
    log("virtual time: the ten-minute MAX_JOB_WAIT scenario")
    runs = [run_child("virtual_timeout", {"db": str(ctx["workdir"] / f"virtual-{i}.db")})
            for i in range(ctx["repeat"])]
    return {"dex": median_run(runs, "wall_s")}


def scenario_cli(ctx: dict[str, Any]) -> dict[str, Any]:
    cfg, w = ctx["cfg"], ctx["workdir"]
    env = child_env()
    env["NO_COLOR"] = "1"
    # As installed for a user: bytecode cached (pip compiles it; an editable install writes
    # __pycache__ on first import). The first, uncounted round writes it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    dex = shutil.which("dex")
    if dex is None:
        out: dict[str, Any] = time_cmds({}, cfg["cli_runs"], env)
        out["help"] = out["list"] = out["inspect"] = {"error": "`dex` is not on PATH"}
        return out
    log(f"cli: building a database of {cfg['cli_flows']} finished flows")
    db = w / "cli-big.db"
    built = run_child("make_big_db", {"db": str(db), "n": cfg["cli_flows"]})
    cmds = {"help": [dex, "--help"]}
    if "error" not in built:
        cmds["list"] = [dex, "--db", str(db), "list"]
        cmds["inspect"] = [dex, "--db", str(db), "inspect", built["sample_id"]]
        cmds["inspect_json"] = [dex, "--db", str(db), "inspect", built["sample_id"], "--json"]
    out = time_cmds(cmds, cfg["cli_runs"], env)
    out["db"] = built
    out["runs"] = cfg["cli_runs"]
    if "error" in built:
        out["list"] = out["inspect"] = out["inspect_json"] = {"error": "database not built: " + built["error"]}
    return out


def _count(db: Path, sql: str) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute(sql).fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return -1


def _dex_worker_ok(env: dict[str, str]) -> bool:
    dex = shutil.which("dex")
    if dex is None:
        return False
    try:
        r = subprocess.run([dex, "worker", "--help"], env=env, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def scenario_recovery(ctx: dict[str, Any]) -> dict[str, Any]:
    n, w = ctx["cfg"]["recovery_n"], ctx["workdir"]
    db, ready = w / "recovery.db", w / "recovery.ready"
    ready.unlink(missing_ok=True)
    env = child_env()
    log(f"recovery: {n} PollingFlows in flight in a child process")
    holder = subprocess.Popen(child_argv("recovery_holder", {"db": str(db), "n": n, "ready_file": str(ready)}),
                              cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    in_flight_sql = "SELECT COUNT(*) FROM steps WHERE step_type = 'AwaitJob' AND status = 'RUNNING'"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and holder.poll() is None:
            if ready.exists() and _count(db, in_flight_sql) == n:
                break
            time.sleep(0.05)
        if holder.poll() is not None:
            err = holder.stderr.read().decode(errors="replace").strip().splitlines() if holder.stderr else []
            return {"error": f"holder exited {holder.returncode}: {err[-1] if err else ''}"}
        in_flight = _count(db, in_flight_sql)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    if in_flight != n:
        return {"error": f"only {in_flight}/{n} flows in flight before the kill"}

    from dexcli.store import Store

    store = Store(db)
    skip = 60 + 10  # HeartbeatTimeout of AwaitJob is 1 min
    store.skip_flows(None, skip)  # every running flow's clock
    store.close()
    use_cli = _dex_worker_ok(env)
    argv = ([shutil.which("dex") or "dex", "--db", str(db), "worker", "--until-idle"] if use_cli
            else child_argv("recovery_worker", {"db": str(db)}))
    running_again_sql = ("SELECT COUNT(*) FROM steps WHERE step_type = 'AwaitJob' AND status = 'RUNNING' "
                         "AND attempt >= 2")
    log(f"recovery: SIGKILLed with {n} in flight; clock skipped {skip} s; starting "
        f"{'dex worker' if use_cli else 'an Engine.run worker subprocess'}")
    t0 = time.perf_counter()
    worker = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first_seen = None
    recovered = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and worker.poll() is None:
            c = _count(db, running_again_sql)
            if c > 0 and first_seen is None:
                first_seen = time.perf_counter() - t0
            if c == n:
                recovered = time.perf_counter() - t0
                break
            time.sleep(0.005)
        rc = worker.poll()
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    lost = _count(db, "SELECT COUNT(*) FROM attempts WHERE outcome = 'LOST' AND error_type = 'Heartbeat'")
    if recovered is None:
        err = worker.stderr.read().decode(errors="replace").strip().splitlines() if worker.stderr else []
        return {"error": f"not every flow running again (worker rc {rc}): {err[-1] if err else 'timed out'}",
                "in_flight": in_flight}
    return {"flows": n, "in_flight": in_flight, "recovered_s": recovered, "first_running_s": first_seen,
            "lost_attempts": lost, "clock_skip_s": skip, "worker": " ".join(argv),
            "worker_kind": "dex worker" if use_cli else "Engine.run subprocess (dex worker unavailable)"}


RUNNERS = {"throughput": scenario_throughput, "concurrent": scenario_concurrent, "pollers": scenario_pollers,
           "waits": scenario_waits, "virtual": scenario_virtual, "cli": scenario_cli, "recovery": scenario_recovery,
           "search": lambda ctx: search.scenario(ctx, time_cmds), "long_feed": long_feed.scenario}


# ------------------------------------------------------------------------------ main -------
def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny N, time-skipping pollers (smoke test)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each measurement (dex and DBOS interleaved); the median, min and max are reported")
    ap.add_argument("--only", default=",".join(SCENARIOS),
                    help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--n", type=int, default=None, help="override the sequential throughput flow count")
    ap.add_argument("--no-dbos", action="store_true", help="skip the DBOS peer even when installed")
    ap.add_argument("--workdir", type=Path, default=None, help="where databases go (default: a temp dir)")
    ap.add_argument("--results", type=Path, default=None,
                    help="where to write RESULTS.md (default bench/RESULTS.md; '-' for nowhere)")
    ap.add_argument("--json", type=Path, default=None, help="also dump the raw results as JSON here")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="measure nothing: render the table and RESULTS.md again from a --json dump of a run")
    return ap.parse_args(argv)


def _shown(args: list[str]) -> list[str]:
    """The command line for the report, with file paths cut to their names (no machine paths)."""
    return [Path(a).name if os.sep in a else a for a in args]


def rerender(source: Path, target: Path | None) -> int:
    """The report of an earlier run (its --json dump) rendered again by this report code: the
    same measurements, machine and command; only the texts are today's."""
    try:
        text = source.read_text()
        data = json.loads(text)
        meta, results = data["meta"], data["results"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"--from-json {source}: not a dump of `python -m bench --json` ({type(exc).__name__}: {exc})",
              file=sys.stderr)
        return 2
    meta["rendered_at"] = report.git_head()
    rows = report.evaluate(results, meta)
    print(report.table(rows))
    target = target if target is not None else ROOT / "bench" / "RESULTS.md"
    if str(target) != "-":
        # the run's temporary work directory (named in dumps from before meta kept it)
        found = re.search(r"/[^\s\"']*/dex-bench-\w+", text)
        workdir = Path(meta.get("workdir") or (found.group(0) if found else "/nonexistent"))
        target.write_text(report.without_local_paths(report.markdown(rows, results, meta), workdir))
        log(f"wrote {target} from {source}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.from_json is not None:
        return rerender(args.from_json, args.results)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in SCENARIOS + OPTIONAL]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    cfg = dict(QUICK if args.quick else FULL)
    if args.n:
        cfg["throughput_n"] = args.n
    from bench.dbos_peer import available

    dbos_ok, dbos_info = available()
    use_dbos = dbos_ok and not args.no_dbos
    dbos_note = (f"DBOS {dbos_info}" if use_dbos else
                 ("DBOS skipped (--no-dbos)" if dbos_ok else
                  f"DBOS not importable ({dbos_info}); install with pip install -e '.[bench]'"))
    log(dbos_note)
    tmp = None
    if args.workdir is None:
        tmp = tempfile.TemporaryDirectory(prefix="dex-bench-")
        workdir = Path(tmp.name)
    else:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
    ctx = {"workdir": workdir, "cfg": cfg, "quick": args.quick, "dbos": use_dbos,
           "repeat": 1 if args.quick else args.repeat}
    results: dict[str, Any] = {}
    started = time.time()
    load_start, speed_start = os.getloadavg(), speed_probe_ms()
    try:
        for name in only:
            t0 = time.perf_counter()
            try:
                results[name] = RUNNERS[name](ctx)
            except Exception as exc:  # one broken scenario must not hide the others
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
            log(f"{name}: done in {time.perf_counter() - t0:.1f} s")
        meta = report.machine_info(workdir)
        meta.update(workdir=str(workdir),
                    command=" ".join([Path(sys.executable).name, "-m", "bench", *_shown(argv or sys.argv[1:])]),
                    dbos=dbos_note, config=cfg, started=started, quick=args.quick,
                    elapsed_s=time.time() - started,
                    load=f"{load_start[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end (1-min load average)",
                    speed=f"{speed_start:.0f} ms at start, {speed_probe_ms():.0f} ms at end")
        rows = report.evaluate(results, meta)
        print(report.table(rows))
        if args.json:
            args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
        target = args.results if args.results is not None else ROOT / "bench" / "RESULTS.md"
        if str(target) != "-":
            target.write_text(report.without_local_paths(report.markdown(rows, results, meta), workdir))
            log(f"wrote {target}")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0
