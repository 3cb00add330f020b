"""A/B two commits of dex on this machine, interleaved: `python -m bench.ab BASE NEW`.

Each commit is unpacked (`git archive`) into a temporary tree; every round runs each chosen
measurement once per tree, alternating (base, new, base, new, …), each in a fresh interpreter
whose imports come from that tree, so machine drift hits both alike. Prints every run, then
the median and the min–max of each figure per tree. bench/PROFILE.md's before/after tables
are made with it:

    python -m bench.ab 5d9956f HEAD --rounds 3
    python -m bench.ab HEAD~1 HEAD --only seq,conc
    python -m bench.ab HEAD~1 HEAD --only backlog   # 100,000 queued flows drained (~1 min a run)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DB = "ab.db"
MEASURES = {
    "seq": "from bench import dex_scenarios as d; r = d.throughput(DB, 2000); "
           "out = {'flows_per_s': r['flows_per_s'], 'cpu_ms_per_flow': r['cpu_s'] * 1000 / r['flows'], "
           "'latency_ms': r['step_latency_mean_ms'], 'p99_ms': r['step_latency_p99_ms'], "
           "'commits_per_flow': r['commits'] / r['flows']}",
    "async": "from bench import dex_scenarios as d; r = d.throughput(DB, 2000, 'ASYNC'); "
             "out = {'flows_per_s': r['flows_per_s'], 'cpu_ms_per_flow': r['cpu_s'] * 1000 / r['flows'], "
             "'commits_per_flow': r['commits'] / r['flows']}",
    "conc": "from bench import concurrent as c; s = c.concurrent_start(DB, 10000); "
            "r = c.concurrent_drain(DB, 10000); out = {'flows_per_s': 10000 / (s['start_s'] + r['drain_s']), "
            "'drain_flows_per_s': r['drain_flows_per_s'], 'cpu_ms_per_flow': r['cpu_ms_per_flow']}",
    # a worker draining a backlog of 100,000 queued flows (~1 min a run): what grows with the queue
    "backlog": "from bench import concurrent as c; s = c.concurrent_start(DB, 100000); "
               "r = c.concurrent_drain(DB, 100000); out = {'drain_flows_per_s': r['drain_flows_per_s'], "
               "'cpu_ms_per_flow': r['cpu_ms_per_flow']}",
    "p1k": "from bench import dex_scenarios as d; r = d.pollers(DB, 1000, 'fast'); "
           "out = {'wall_over_ideal': r['ratio_total'], 'cpu_s': r['cpu_s']}",
    "p10k": "from bench import dex_scenarios as d; r = d.pollers(DB, 10000, 'seed'); "
            "out = {'wall_over_ideal': r['ratio_total'], 'cpu_s': r['cpu_s'], 'submit_s': r['submit_s']}",
}


def unpack(rev: str, into: Path) -> Path:
    into.mkdir(parents=True)
    got = subprocess.run(["git", "archive", rev], capture_output=True)
    if got.returncode:
        why = (got.stderr.decode().strip().splitlines() or ["git archive failed"])[-1]
        print(f"bench.ab: error: {rev!r} is not a commit of this repository ({why})", file=sys.stderr)
        raise SystemExit(2)
    archive = got.stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure(tree: Path, name: str, work: Path) -> dict[str, float]:
    for suffix in ("", "-wal", "-shm"):
        (work / f"{DB}{suffix}").unlink(missing_ok=True)
    code = f"import json\nDB = {str(work / DB)!r}\n{MEASURES[name]}\nprint(json.dumps(out))"
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"bench.ab: error: {name} failed in {tree}: {why}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=3)
    usual = [name for name in MEASURES if name != "backlog"]  # backlog only when asked: ~1 min a run
    ap.add_argument("--only", default=",".join(usual),
                    help=f"comma-separated subset of {','.join(MEASURES)} (default: all but backlog)")
    args = ap.parse_args()
    names = args.only.split(",")
    unknown = [name for name in names if name not in MEASURES]
    if unknown:
        ap.error(f"--only: no measurement named {', '.join(map(repr, unknown))} (there are {', '.join(MEASURES)})")
    with tempfile.TemporaryDirectory() as tmp:
        trees = {rev: unpack(rev, Path(tmp) / f"tree{i}") for i, rev in enumerate((args.base, args.new))}
        runs: dict[tuple[str, str], list[dict[str, float]]] = {(n, r): [] for n in names for r in trees}
        for i in range(args.rounds):
            for name in names:
                for rev, tree in trees.items():
                    runs[name, rev].append(measure(tree, name, Path(tmp)))
                    print(f"round {i + 1} {name} {rev}: {runs[name, rev][-1]}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for (name, rev), got in runs.items():
        summary = {k: f"{statistics.median(r[k] for r in got):.3f} ({min(r[k] for r in got):.3f}–"
                      f"{max(r[k] for r in got):.3f})" for k in got[0]}
        print(f"{name} {rev}: {summary}")


if __name__ == "__main__":
    main()
