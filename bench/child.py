"""`python -m bench.child SCENARIO JSON`: one measurement in its own process."""

from __future__ import annotations

import json
import os
import sys
import traceback

from bench.common import emit


def main() -> None:
    scenario, args = sys.argv[1], json.loads(sys.argv[2])
    cpu = args.pop("cpu", None)
    if cpu is not None:  # this process (and every thread it starts) on that one CPU (Linux)
        os.sched_setaffinity(0, {cpu})
    import importlib

    modules = ("bench.dbos_peer",) if scenario.startswith("dbos_") else (
        "bench.dex_scenarios", "bench.concurrent", "bench.waits", "bench.long_feed")
    fn = next(getattr(m, scenario) for m in map(importlib.import_module, modules) if hasattr(m, scenario))
    try:
        result = fn(**args)
    except Exception as exc:  # reported, not raised: the harness goes on with the others
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    if result is not None:
        if cpu is not None and "error" not in result:
            result["cpus"] = sorted(os.sched_getaffinity(0))  # as the run saw them: the confinement held
        emit(result)


if __name__ == "__main__":
    main()
