"""Two `dex worker` processes on one database: 100 three-step flows, each completed exactly once,
no two attempts of one step execution overlapping; and a worker SIGKILLed mid-run whose leases
the other takes over once `dex time skip 2m --all` has moved those flows' clocks past their heartbeat deadlines.

The workers start first (a polling flow whose job ends once every flow is started keeps `--until-idle` workers alive);
the flows are started from this process while both are polling for work, so both get some.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dexcli.engine.clock import Clock
from dexcli.engine.core import Engine
from dexcli.engine.doctor import check as doctor_check
from dexcli.engine.host import StoreHost
from dexcli.sdk.registry import Registry
from dexcli.store import FlowState, StepState, Store
from dexcli_flows.job_service import FakeJobService
from dexcli_flows.polling import PollingFlow
from dexcli_flows.three_steps import ThreeStepFlow
from tests.crash.crashkit import TEST_TIMEOUT, Trials, check_no_overlap, dex, finish, owner_pid, sigkill, spawn

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

N_FLOWS = 100


def _engine(db: Path) -> Engine:
    store = Store(db)
    return Engine(store, Clock(), Registry(allow_async_handlers=True))


def _sentinel_jobs(engine: Engine) -> FakeJobService:
    return FakeJobService(StoreHost(engine.store, engine.clock))


def _start_sentinel(engine: Engine) -> None:
    """A polling flow whose job runs until the test has started every flow (`complete_job`), however
    long that takes on a loaded machine: it keeps the `--until-idle` workers from going idle first."""
    _sentinel_jobs(engine).configure_job("sentinel", duration_seconds=600)
    engine.start_flow(PollingFlow(), "sentinel", None, flow_ref="name:polling")


def _scenario(db: Path, kill: bool, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    engine = _engine(db)
    _start_sentinel(engine)
    a = spawn(db, "worker", "--until-idle")
    assert "dex worker" in a.stdout.readline()
    if kill:  # the worker to be killed must hold a lease then: let it take the sentinel first
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            row = engine.store.read(lambda tx: tx.get_step("sentinel", "AwaitJob-1"))
            if row is not None and row.status is StepState.RUNNING and owner_pid(row.lease_owner) == a.pid:
                break
            time.sleep(0.05)
    b = spawn(db, "worker", "--until-idle")
    assert "dex worker" in b.stdout.readline()
    flow = ThreeStepFlow()
    kill_after = rng.randint(30, 70) if kill else None
    killed_at = None
    for i in range(N_FLOWS):
        engine.start_flow(flow, f"w-{i:03d}", i, flow_ref="name:three-steps")
        time.sleep(0.01)
        if kill_after is not None and i == kill_after:
            sigkill(a)
            killed_at = i
    _sentinel_jobs(engine).complete_job("sentinel")  # every flow is started: the workers may go idle now
    skip = None
    if kill:
        finish(a)
        skip = dex(db, "time", "skip", "2m", "--all")
    procs = [finish(a), finish(b)]
    engine.store.close()
    doctor = dex(db, "doctor")
    return {"db": db, "procs": procs, "doctor": doctor, "skip": skip, "killed_at": killed_at}


def _late_flow_for_time_skip_worker(db: Path) -> dict[str, Any]:
    """`dex worker --time-skip` (no --until-idle) is idle; a client then starts a flow."""
    Store(db).close()
    w = spawn(db, "worker", "--time-skip")
    assert "dex worker" in w.stdout.readline()
    engine = _engine(db)
    engine.start_flow(ThreeStepFlow(), "late", 1, flow_ref="name:three-steps")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline and engine.store.get_flow("late").is_running:
        time.sleep(0.1)
    status = engine.store.get_flow("late").status.value
    engine.store.close()
    w.send_signal(signal.SIGINT)
    return {"db": db, "status": status, "worker": finish(w, timeout=5)}


def _time_skip_worker_next_to_live_run(db: Path) -> dict[str, Any]:
    """A healthy `dex run polling` (real time, heartbeating every 2 s) and, on the same
    database, `dex worker --until-idle --time-skip`. The job is finished early after 3 s so
    that the scenario ends in seconds even when nobody skips time."""
    a = spawn(db, "run", "polling", "--flow-id", "live", "--job-duration", "5m")
    assert "dex" in a.stdout.readline()
    time.sleep(0.7)  # AwaitJob-1 attempt 1 is running in `a`, QUEUED written
    b = spawn(db, "worker", "--until-idle", "--time-skip")
    time.sleep(3)
    store = Store(db)
    FakeJobService(StoreHost(store, Clock())).complete_job("live")
    store.close()
    return {"db": db, "run": finish(a, timeout=30), "worker": finish(b, timeout=30)}


TRIALS = Trials("workers", priority=0)
TRIALS.add("two-workers", _scenario, False, 4)
TRIALS.add("one-killed", _scenario, True, 4)
TRIALS.add("late-flow", _late_flow_for_time_skip_worker)
TRIALS.add("live-lease", _time_skip_worker_next_to_live_run)


def _rows(db: Path, sql: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(db)) as c:
        c.row_factory = sqlite3.Row
        return [dict(r) for r in c.execute(sql)]


def _check_all_flows(db: Path, why: str) -> list[dict[str, Any]]:
    flows = {f["flow_id"]: f for f in _rows(db, "SELECT * FROM flows")}
    assert len(flows) == N_FLOWS + 1, why
    for fid, f in flows.items():
        assert f["status"] == "COMPLETED", f"{fid}: {f}\n{why}"
        outputs = [c["output"] for c in json.loads(f["completions"])]
        if fid == "sentinel":
            assert outputs == ["artifact for sentinel"], why
        else:
            assert outputs == [2 * int(fid[2:]) + 5], f"{fid}: {outputs}\n{why}"
    # each decision applied exactly once; no extra step executions
    steps = _rows(db, "SELECT flow_id, step_execution_id, status FROM steps WHERE flow_id != 'sentinel'")
    assert len(steps) == 3 * N_FLOWS and all(s["status"] == "COMPLETED" for s in steps), why
    assert {s["step_execution_id"] for s in steps} == {"First-1", "Second-1", "Third-1"}, why
    events = _rows(db, "SELECT flow_id, type, payload FROM history")
    done = Counter((e["flow_id"], json.loads(e["payload"])["stepExecutionId"])
                   for e in events if e["type"] == "StepExecuteCompleted")
    assert set(done.values()) == {1}, [k for k, v in done.items() if v != 1]
    assert len(done) == 3 * N_FLOWS + 2, why
    closed = Counter(e["flow_id"] for e in events if e["type"] == "FlowClosed")
    assert set(closed.values()) == {1} and len(closed) == N_FLOWS + 1, why
    attempts = _rows(db, "SELECT * FROM attempts")
    check_no_overlap(attempts, why)
    return attempts


@pytest.mark.trials("two-workers")
def test_two_workers_run_100_flows_exactly_once(trials):
    r = trials["two-workers"]
    db = r["db"]
    why = "\n".join(p.describe() for p in r["procs"])
    assert [p.returncode for p in r["procs"]] == [0, 0], why
    attempts = _check_all_flows(db, why)
    three = [a for a in attempts if a["flow_id"] != "sentinel"]
    assert len(three) == 3 * N_FLOWS and all(a["outcome"] == "COMPLETED" for a in three), why
    owners = Counter(owner_pid(a["owner"]) for a in attempts)
    assert set(owners) == {p.pid for p in r["procs"]}, f"both workers should have run attempts: {owners}"
    assert r["doctor"].returncode == 0 and "0 problem(s)" in r["doctor"].stdout, r["doctor"].describe()


@pytest.mark.trials("one-killed")
def test_killed_worker_is_taken_over_after_its_leases_expire(trials):
    r = trials["one-killed"]
    db = r["db"]
    a, b = r["procs"]
    why = "\n".join(p.describe() for p in r["procs"])
    assert a.returncode == -9 and b.returncode == 0, why
    assert r["skip"].returncode == 0, r["skip"].describe()
    attempts = _check_all_flows(db, why)
    lost = [x for x in attempts if x["outcome"] == "LOST"]
    assert lost, f"the kill left no attempt running; nothing was taken over\n{why}"
    for x in lost:
        assert owner_pid(x["owner"]) == a.pid and x["error_type"] == "Heartbeat", x
    by_key = {(x["flow_id"], x["step_execution_id"], x["attempt"]): x for x in attempts}
    for x in lost:
        nxt = by_key[(x["flow_id"], x["step_execution_id"], x["attempt"] + 1)]
        assert owner_pid(nxt["owner"]) == b.pid and nxt["outcome"] == "COMPLETED", nxt
    # after the kill, only the survivor ran anything
    kill_time = max(x["start_time"] for x in attempts if owner_pid(x["owner"]) == a.pid)
    assert all(owner_pid(x["owner"]) == b.pid for x in attempts if x["start_time"] > kill_time)
    assert {x["outcome"] for x in attempts} <= {"COMPLETED", "LOST", "TIMED_OUT"}, why
    assert r["doctor"].returncode == 0 and "0 problem(s)" in r["doctor"].stdout, r["doctor"].describe()


@pytest.mark.trials("late-flow")
def test_time_skip_worker_picks_up_flows_started_later(trials):
    r = trials["late-flow"]
    assert r["status"] == "COMPLETED", r["worker"].describe()


@pytest.mark.trials("live-lease")
def test_time_skip_worker_does_not_take_a_live_lease(trials):
    r = trials["live-lease"]
    db = r["db"]
    why = "\n".join(p.describe() for p in (r["run"], r["worker"]))
    assert r["run"].returncode == 0 and r["worker"].returncode == 0, why
    with closing(Store(db)) as store:
        flow = store.get_flow("live")
        attempts = [a for a in store.attempts_of("live") if a.step_execution_id == "AwaitJob-1"]
        problems = doctor_check(store)[0]
    assert problems == [], problems
    assert flow.status is FlowState.COMPLETED and json.loads(flow.completions)[0]["output"] == "artifact for live"
    # nobody died: the attempt the healthy `dex run` holds must not be declared lost
    assert [(a.outcome.value, owner_pid(a.owner)) for a in attempts] == [("COMPLETED", r["run"].pid)], (
        f"{attempts}\n{why}")
