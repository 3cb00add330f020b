"""`dex time`: each flow has its own clock; skips and resets move only the flows named."""

from __future__ import annotations

import time
from datetime import datetime

from dexcli.store import Store
from tests.cli.cli_helpers import assert_error, start_flow


def _offsets(cli) -> dict[str, float]:
    store = Store(cli.db)
    try:
        return {f.flow_id: f.clock_offset for f in store.list_flows(None, None, 100)}
    finally:
        store.close()


def test_a_skip_moves_only_the_flows_named(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    start_flow(cli.db, "three-steps", "b", 1)
    assert "every flow runs on real time" in cli.ok("time").stdout
    res = cli.ok("time", "skip", "90s", "b")
    assert res.stdout.strip() == "b: clock moved forward 1 m 30 s; now +1 m 30 s ahead"
    cli.ok("time", "skip", "1m30s", "b")
    assert _offsets(cli) == {"a": 0.0, "b": 180.0}
    assert cli.ok("time").stdout.strip() == "b  RUNNING  +3 m ahead of real time"
    listing = {ln.split()[0]: ln for ln in cli.ok("list").stdout.splitlines()[1:]}
    assert "(+3 m skipped)" in listing["b"] and "skipped" not in listing["a"]


def test_skip_all_moves_every_running_flow(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "done")
    out = cli.ok("time", "skip", "1m", "--all").stdout
    assert out.strip() == "a: clock moved forward 1 m; now +1 m ahead"
    assert _offsets(cli) == {"a": 60.0, "done": 0.0}


def test_time_skip_says_what_is_wrong(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    cli.ok("run", "three-steps", "--input", "1", "--flow-id", "done")
    assert_error(cli("time", "skip", "1m"), 2, "which flows? name them (dex time skip 2m FLOW_ID) or pass --all")
    assert_error(cli("time", "skip", "1m", "a", "--all"), 2, "not both")
    assert_error(cli("time", "skip", "1m", "nope"), 3, "no flow with id 'nope'")
    assert_error(cli("time", "skip", "1m", "done"), 4, "flow done is already COMPLETED")
    assert _offsets(cli) == {"a": 0.0, "done": 0.0}


def test_run_with_time_skip_moves_only_its_own_flow_and_starts_in_real_time(cli):
    start_flow(cli.db, "three-steps", "other", 1)
    before = time.time()
    cli.ok("run", "polling", "--flow-id", "demo", "--job-duration", "2m", "--time-skip")
    offsets = _offsets(cli)
    assert offsets["other"] == 0.0 and offsets["demo"] >= 100  # the 2 m job was skipped, on demo only
    line = next(ln for ln in cli.ok("list").stdout.splitlines() if ln.startswith("demo"))
    started = datetime.strptime(" ".join(line.split()[3:5]), "%Y-%m-%d %H:%M:%S").astimezone().timestamp()
    assert started <= time.time() + 1 and started >= before - 3600 * 24  # not in the future
    assert "skipped)" in line


def test_reset_puts_a_flow_back_on_real_time(cli):
    start_flow(cli.db, "polling", "demo", job_duration=120)
    cli.ok("time", "skip", "2m", "demo")
    res = cli.ok("time", "reset", "demo")
    assert res.stdout.startswith("demo: back on real time (its times moved back ")
    assert _offsets(cli) == {"demo": 0.0}
    assert cli.ok("time", "reset", "demo").stdout.strip() == "demo: already on real time"
    assert "every flow runs on real time" in cli.ok("time").stdout
    assert cli.ok("doctor").stdout.strip().endswith("0 problem(s)")
    assert_error(cli("time", "reset", "nope"), 3, "no flow with id 'nope'")


def test_time_lists_the_running_flows_aligned_and_the_closed_ones_with_all(cli):
    start_flow(cli.db, "three-steps", "a", 1)
    start_flow(cli.db, "three-steps", "a-longer-flow-id", 1)
    cli.ok("time", "skip", "90s", "a")
    cli.ok("time", "skip", "1h", "a-longer-flow-id")
    cli.ok("run", "polling", "--flow-id", "closed", "--time-skip")  # skipped, then COMPLETED
    lines = cli.ok("time").stdout.splitlines()
    assert [ln.split()[0] for ln in lines[:-1]] == ["a-longer-flow-id", "a"]
    assert len({ln.index("RUNNING") for ln in lines[:-1]}) == 1 and len({ln.index("+") for ln in lines[:-1]}) == 1
    assert lines[-1] == "(1 closed flow skipped too: dex time --all lists it)"
    every = cli.ok("time", "--all").stdout.splitlines()
    assert [ln.split()[:2] for ln in every] == [["closed", "COMPLETED"], ["a-longer-flow-id", "RUNNING"],
                                                ["a", "RUNNING"]]
    assert len({ln.index("+") for ln in every}) == 1


def test_reset_of_a_closed_flow_is_refused_and_changes_nothing(cli):
    cli.ok("run", "polling", "--flow-id", "done", "--job-duration", "2m", "--time-skip")
    before = cli.json("inspect", "done", "--json")
    assert _offsets(cli)["done"] >= 100
    assert_error(cli("time", "reset", "done"), 4, "flow done is already COMPLETED: its clock no longer runs")
    assert cli.json("inspect", "done", "--json")["history"] == before["history"]
    assert _offsets(cli)["done"] >= 100
