"""`python -m bench.search` keeps working on a small database (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_search_bench_runs_and_reports_each_query(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.search", "--flows", "400", "--runs", "1", "--workdir",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    result = json.loads(proc.stdout)
    assert result["db"]["flows"] == 400
    hits = {name: q["hits"] for name, q in result["queries"].items()}
    assert hits == {"equality_25pct": 50, "equality_0.1pct": 1, "and_flow_status": 50, "range": 0, "not_equal": 50}
    assert "list_query" in result["cli"] or "error" in result["cli"]
    assert set(result["verdict"]) == {"equality_worst_median_ms", "equality_ok", "cli_over_ms", "cli_ok"}
