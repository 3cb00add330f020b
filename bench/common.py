"""Small helpers shared by the scenarios: resource usage, percentiles, running a child."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULT_PREFIX = "BENCH_RESULT "
ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_mib() -> float:
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def speed_probe_ms() -> float:
    """Milliseconds for a fixed pure-Python loop (best of 3): how fast this shared VM runs
    Python right now. The load average misses a slow host; absolute times scale with this."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(1_000_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    xs = sorted(values)
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1)))))
    return xs[k]


def fresh_db(path: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(f"{path}{suffix}")
    return path


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def child_argv(scenario: str, args: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "bench.child", scenario, json.dumps(args)]


def run_child(scenario: str, args: dict[str, Any], timeout: float = 900) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter (clean RSS and CPU counters); return its JSON."""
    t0 = time.perf_counter()
    proc = subprocess.run(child_argv(scenario, args), cwd=ROOT, env=child_env(), capture_output=True,
                          text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            out: dict[str, Any] = json.loads(line[len(RESULT_PREFIX):])
            out.setdefault("child_wall_s", wall)
            return out
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return {"error": f"{scenario} exited {proc.returncode}: " + " | ".join(tail)}


def emit(result: dict[str, Any]) -> None:
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def time_cmds(cmds: dict[str, list[str]], runs: int, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Time each command `runs` times, round-robin, so that a machine that speeds up or slows
    down mid-measurement moves all of them alike. Each gets its median, and `over_ms`: the
    median of its excess over `python -c pass` within the same round. One uncounted round
    first warms the page cache and writes the bytecode."""
    base = [sys.executable, "-c", "pass"]
    all_cmds = {"baseline": base, **cmds}
    times: dict[str, list[float]] = {k: [] for k in all_cmds}
    out: dict[str, dict[str, Any]] = {}
    for i in range(runs + 1):
        for name, argv in all_cmds.items():
            if name in out:
                continue
            t0 = time.perf_counter()
            last = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
            elapsed = (time.perf_counter() - t0) * 1000
            if last.returncode != 0:
                err = (last.stderr or last.stdout).strip().splitlines()
                out[name] = {"error": f"exit {last.returncode}: {err[-1] if err else ''}"[:300], "cmd": " ".join(argv)}
            elif i > 0:
                times[name].append(elapsed)
    for name, argv in all_cmds.items():
        if name in out:
            continue
        ts = sorted(times[name])
        out[name] = {"median_ms": ts[len(ts) // 2], "min_ms": ts[0], "max_ms": ts[-1], "cmd": " ".join(argv)}
        if name != "baseline" and "error" not in out["baseline"]:
            over = sorted(t - b for t, b in zip(times[name], times["baseline"], strict=True))
            out[name].update(over_ms=over[len(over) // 2], over_min_ms=over[0], over_max_ms=over[-1])
    return out
