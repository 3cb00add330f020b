"""A worker's memory over a long feed: `python -m bench --only long_feed` (or `python -m
bench.long_feed [--quick]` on its own).

One engine drives every flow of its database (as `dex worker`, with its GC settings) while
ThreeStepFlow runs keep arriving, 500 at a time, each batch drained before the next; time is
virtual, so only the engine's own work is measured. The process's resident set is read at
10,000, 50,000 and 150,000 flows (1,000 / 5,000 / 15,000 with --quick). Target: flat — what a
worker holds does not grow with the flows it has finished (no more than 10 MiB from the first
reading to the last).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import fresh_db, peak_rss_mib

FULL_AT = (10_000, 50_000, 150_000)
QUICK_AT = (1_000, 5_000, 15_000)
BATCH = 500
TARGET_GROWTH_MIB = 10.0


def rss_mib() -> float:
    """The resident set now (not the peak), from /proc."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def long_feed(db: str, at: list[int]) -> dict[str, Any]:
    """Runs in a child process (bench.child): the RSS at each count of flows in `at`."""
    from dexcli.builder import build_engine
    from dexcli.engine.clock import Clock
    from dexcli.engine.clock import run as run_on_clock
    from dexcli.engine.process import tune_gc
    from dexcli.sdk.registry import Registry
    from dexcli.store import Store
    from dexcli_flows.three_steps import ThreeStepFlow

    fresh_db(Path(db))
    engine = build_engine(Store(db), flows=Registry([], allow_async_handlers=True), clock=Clock.virtual())
    flow = ThreeStepFlow()
    readings: list[dict[str, float]] = []
    t0 = time.perf_counter()

    async def go() -> None:
        done = 0
        for target in at:
            while done < target:
                for i in range(done, min(done + BATCH, target)):
                    engine.start_flow(flow, f"lf-{i}", i, flow_ref="name:three-steps")
                done = min(done + BATCH, target)
                await engine.drive_async(None, until_idle=True, release=False)
                if done == BATCH:
                    tune_gc()  # once set up and warm, as `dex worker` does before it drives
            readings.append({"flows": done, "rss_mib": rss_mib(), "wall_s": time.perf_counter() - t0})

    run_on_clock(go, engine.clock)
    engine.store.close()
    growth = readings[-1]["rss_mib"] - readings[0]["rss_mib"]
    return {"readings": readings, "growth_mib": growth, "peak_rss_mib": peak_rss_mib(),
            "ok": growth <= TARGET_GROWTH_MIB}


def scenario(ctx: dict[str, Any]) -> dict[str, Any]:
    """bench.run's hook (its workdir and --quick)."""
    from bench.common import run_child

    at = QUICK_AT if ctx["quick"] else FULL_AT
    return dict(run_child("long_feed", {"db": str(ctx["workdir"] / "long-feed.db"), "at": list(at)}))


def rows(r: dict[str, Any], row: Any) -> list[dict[str, str]]:
    """The report's row, made with its `row` function."""
    if "error" in r:
        return [row("8 long feed", "worker RSS over a long feed", "error", "—", "flat", "not measured", r["error"])]
    readings = r["readings"]
    shown = " / ".join(f"{x['rss_mib']:.0f}" for x in readings)
    at = " / ".join(f"{x['flows'] // 1000}k" for x in readings)
    return [row("8 long feed", f"worker RSS at {at} flows", f"{shown} MiB", "—",
                f"flat (≤ +{TARGET_GROWTH_MIB:.0f} MiB)", "met" if r["ok"] else "missed",
                f"+{r['growth_mib']:.1f} MiB from the first reading to the last; ThreeStepFlow runs fed {BATCH} at a "
                f"time to one engine driving every flow, virtual time, {readings[-1]['wall_s']:.0f} s in all")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.long_feed", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="read at 1k, 5k and 15k flows")
    ap.add_argument("--db", type=Path, default=Path("long-feed.db"))
    args = ap.parse_args(argv)
    result = long_feed(str(args.db), list(QUICK_AT if args.quick else FULL_AT))
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
