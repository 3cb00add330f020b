"""Search on a big database: `python -m bench.search [--flows 100000] [--runs 15]`.

Builds a database of N flows (a quarter closed), each with an indexed OrderStatus (KEYWORD: new,
paid, shipped, done, and `rare` on one flow in a thousand) and Amount (INT, 0..499), written
with the store's own statements. Then it measures, warm:

- the store's search (`dexcli.store.search.search_flows`, one page of 50) for an equality that
  matches a quarter of the flows, one that matches 0.1 %, a conjunction with FlowStatus, a
  range and an inequality — in-process, the median of `--runs`;
- `dex list --query "OrderStatus = 'paid' AND FlowStatus = 'RUNNING'"` as a command, its median
  excess over `python -c pass` (the CLI latency budget is 150 ms).

Targets: an indexed equality under 50 ms; `dex list --query` within 150 ms over `python -c pass`.
`python -m bench --only search --results -` runs the same from the main runner.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import child_env, fresh_db, time_cmds

QUERIES = {
    "equality_25pct": "OrderStatus = 'paid'",
    "equality_0.1pct": "OrderStatus = 'rare'",
    "and_flow_status": "OrderStatus = 'paid' AND FlowStatus = 'RUNNING'",
    "range": "Amount >= 490",
    "not_equal": "OrderStatus != 'paid'",
}
CLI_QUERY = "OrderStatus = 'paid' AND FlowStatus = 'RUNNING'"
TARGET_QUERY_MS = 50.0
TARGET_CLI_OVER_MS = 150.0
STATUSES = ("new", "paid", "shipped", "done")


def build(db: Path, n: int) -> dict[str, Any]:
    from dexcli.store import FlowState, Store

    fresh_db(db)
    t0 = time.perf_counter()
    store = Store(db, synchronous="OFF")
    with store.tx() as tx:
        for i in range(n):
            flow_id, start = f"order-{i:06d}", 1_767_225_600.0 + i
            tx.insert_flow_if_new(flow_id, f"run-{i}", "OrderFlow", None, "1", f"req-{i}", start)
            status = "rare" if i % 1000 == 0 else STATUSES[i % 4]
            tx.put_attribute(flow_id, "status", "status", None, json.dumps(status), start)
            tx.set_search(flow_id, "status", "OrderStatus", "keyword", [(status, None)])
            tx.put_attribute(flow_id, "amount", "amount", None, str(i % 500), start)
            tx.set_search(flow_id, "amount", "Amount", "int", [(None, float(i % 500))])
            if i % 4 == 3:
                tx.close_flow(flow_id, FlowState.COMPLETED, start + 60, None, None)
    store.close()
    return {"flows": n, "build_s": time.perf_counter() - t0, "size_mib": db.stat().st_size / 2**20}


def measure_queries(db: Path, runs: int) -> dict[str, Any]:
    from dexcli.store import Store
    from dexcli.store.search import search_flows

    store = Store(db)
    out: dict[str, Any] = {}
    for name, query in QUERIES.items():
        times, hits = [], 0
        for _ in range(runs + 1):  # the first warms the page cache
            t0 = time.perf_counter()
            hits = len(search_flows(store, query, 50).hits)
            times.append((time.perf_counter() - t0) * 1000)
        ts = sorted(times[1:])
        out[name] = {"query": query, "median_ms": ts[len(ts) // 2], "max_ms": ts[-1], "hits": hits}
    store.close()
    return out


def scenario(ctx: dict[str, Any], time_cmds: Callable[..., dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The runner's hook: `ctx` as bench.run's (workdir, quick), `time_cmds` its command timer."""
    n, runs = (2000, 1) if ctx["quick"] else (100_000, 15)
    return run(ctx["workdir"] / "search-big.db", n, runs, time_cmds)


def run(db: Path, n: int, runs: int, time_cmds: Callable[..., dict[str, dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"db": build(db, n), "queries": measure_queries(db, runs)}
    dex = shutil.which("dex")
    env = child_env()
    env["NO_COLOR"] = "1"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed for a user (as bench.run's cli scenario)
    if dex is None:
        out["cli"] = {"error": "`dex` is not on PATH"}
    else:
        out["cli"] = time_cmds({"list_query": [dex, "--db", str(db), "list", "--query", CLI_QUERY]}, runs, env)
    worst = max(q["median_ms"] for q in out["queries"].values() if q["query"].startswith("OrderStatus ="))
    over = out["cli"].get("list_query", {}).get("over_ms")
    out["verdict"] = {"equality_worst_median_ms": worst, "equality_ok": worst < TARGET_QUERY_MS,
                      "cli_over_ms": over, "cli_ok": over is not None and over <= TARGET_CLI_OVER_MS}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.search", description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--workdir", type=Path, default=None, help="where the database goes (default: a temp dir)")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="dex-bench-search-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        result = run(workdir / "search-big.db", args.flows, args.runs, time_cmds)
    print(json.dumps(result, indent=1, default=str))
    return 0 if result["verdict"]["equality_ok"] and result["verdict"]["cli_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
