"""The benchmark harness keeps working: `python -m bench --quick` end to end, tiny N, no DBOS.

No timing assertions: only that every scenario ran and the report was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_run_writes_a_report(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    raw = tmp_path / "raw.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--no-dbos", "--workdir", str(tmp_path / "work"),
         "--results", str(results), "--json", str(raw)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(raw.read_text())["results"]
    assert set(data) == {"throughput", "concurrent", "pollers", "waits", "virtual", "cli", "recovery"}
    conc = data["concurrent"]["dex"]
    assert "error" not in conc, conc
    assert conc["completed"] == conc["flows"] and conc["transitions"] == 3 * conc["flows"]
    assert data["waits"]["timers"].get("outcomes") == {"expired": data["waits"]["timers"]["flows"]}, data["waits"]
    assert data["waits"]["rpc"].get("approved") == data["waits"]["rpc"]["rpcs"], data["waits"]
    tp = data["throughput"]["dex"]
    assert "error" not in tp, tp
    assert tp["not_completed"] == 0 and tp["transitions"] == 3 * tp["flows"]
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 1:  # the same run on one CPU
        pinned = data["throughput"]["dex_pinned"]
        assert "error" not in pinned, pinned
        assert pinned["cpus"] == [pinned["cpu"]] and pinned["not_completed"] == 0
        assert "flows/s, sequential, the process on one CPU" in results.read_text()
    for key in ("dex_1k", "dex_10k"):
        p = data["pollers"][key]
        assert "error" not in p, p
        assert p["statuses"] == {"COMPLETED": p["flows"]}
        assert p["heartbeat_timeouts"] == 0
    assert data["virtual"]["dex"].get("status") == "FAILED", data["virtual"]
    assert "error" not in data["recovery"], data["recovery"]  # worker: `dex worker` or the fallback
    assert "DBOS" not in data["throughput"] and "dbos" not in data["throughput"]
    assert "dbos" not in data["concurrent"]
    text = results.read_text()
    assert "## Targets" in text and "quick mode" in text
    assert "verdict" in proc.stdout
    assert str(tmp_path) not in text  # the work directory is <workdir> in a committed report
    again = tmp_path / "again.md"  # rendered from the dump alone: the same report, measured once
    proc = subprocess.run([sys.executable, "-m", "bench", "--from-json", str(raw), "--results", str(again)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, *rest = again.read_text().split("\n", 3)[2:]
    assert "rendered again from that run's raw results" in first and rest == text.split("\n", 3)[3:]
    bindir = str(Path(sys.executable).parent)  # rendered where `dex` is not on PATH: the same text still
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bindir)
    proc = subprocess.run([sys.executable, "-m", "bench", "--from-json", str(raw), "--results", str(again)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, env=dict(os.environ, PATH=path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert again.read_text().split("\n", 3)[3:] == text.split("\n", 3)[3:]


def test_unknown_scenario_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench", "--only", "nope", "--results", "-"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown scenario" in proc.stderr


def test_a_report_from_something_not_a_dump_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for source in (bad, tmp_path / "missing.json"):
        proc = subprocess.run([sys.executable, "-m", "bench", "--from-json", str(source), "--results", "-"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert "not a dump of `python -m bench --json`" in proc.stderr


def test_ab_of_a_commit_that_does_not_exist_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.ab", "no-such-commit", "HEAD", "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'no-such-commit' is not a commit of this repository" in proc.stderr


def test_ab_of_a_measurement_that_does_not_exist_is_a_usage_error() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.ab", "HEAD", "HEAD", "--only", "seq,nope"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "no measurement named 'nope'" in proc.stderr and "backlog" in proc.stderr


def test_probes_print_one_line_of_json_and_refuse_a_bad_count() -> None:
    for probe, n in (("split", 3), ("stages", 3), ("pingpong", 3), ("statements", 5), ("threads", 5),
                     ("timeline", 4)):
        skip = ["--time-skip"] if probe == "timeline" else []  # the pollers' waits jumped: a blink, not 3 s
        proc = subprocess.run([sys.executable, "-m", "bench.probes", probe, "--n", str(n), *skip],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        out = json.loads(proc.stdout)
        assert out["probe"] == probe and out["cpus"]
        if probe == "split":  # every flow ran, its steps on a thread other than the caller's
            assert out["flows"] == n and out["not_completed"] == 0 and out["flows_per_s"] > 0
            assert out["caller_cpu_us"] > 0 and out["handler_cpu_us"] > 0
        elif probe == "stages":  # every stage of a flow was stamped, each handler's and transition's
            assert out["flows"] == n and out["not_completed"] == 0
            assert set(out["median_us"]) == {"start_flow", "drive to First", "First's handler", "First's transition",
                                             "Second's handler", "Second's transition", "Third's handler",
                                             "Third's transition, close, drive's end"}, out["median_us"]
            assert all(v > 0 for v in out["median_us"].values())
        elif probe == "threads":  # CPU was found on the loop's thread, and the hand-offs as switches
            # (a handler thread of so short a drain may spend less than a clock tick: not asserted)
            assert out["flows"] == n and out["cpu_s"] > 0 and 0 < out["loop_thread_share"] <= 1
            assert out["voluntary_switches"] > 0
        elif probe == "timeline":  # every flow closed, and each phase came after the one before it
            assert out["flows"] == n and out["closed"] == n and out["job_s"] == 3.0
            for key in ("job_started", "start_job_committed", "closed_at", "first_poll_lag", "seen_after_done"):
                assert set(out[key]) == {"min", "p10", "p50", "p90", "max"}, out[key]
            assert out["job_started"]["max"] <= out["start_job_committed"]["min"]
            assert out["first_poll_lag"]["min"] > 0 and out["seen_after_done"]["min"] > 0  # seen only once done
            assert out["closed_at"]["min"] >= out["job_s"]
        elif probe == "statements":  # the drain's writes were timed, and none builds a temporary B-tree
            writes = [t for t in out["top"] if t["sql"].startswith(("UPDATE steps", "INSERT INTO steps"))]
            assert out["flows"] == n and out["statements"] > 5 * n and writes
            assert all(t["temp_btrees"] == 0 for t in writes), writes
        else:
            assert out["pairs"] == n and out["two_threads_wall_us"] > 0
    proc = subprocess.run([sys.executable, "-m", "bench.probes", "split", "--n", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "--n must be at least 1" in proc.stderr
