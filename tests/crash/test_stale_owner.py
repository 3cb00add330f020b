"""A stale owner that wakes up is fenced.

`dex run polling` (real time, 5 m job) is frozen with SIGSTOP — a stuck worker, not a dead one;
`dex resume --time-skip` declares its attempt lost after the heartbeat timeout and finishes the
flow; then the frozen process gets SIGCONT. Everything it still tries — heartbeats, Stream
writes, its timeout, its decision — must be refused: the database after it exits is exactly
the database before it woke.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest

from crashkit import Trial, check_recovered, dex, finish, flow_args, once, snapshot, spawn, submit

SEEDS = range(3)


def _trial(seed: int, db: Path) -> Trial:
    rng = random.Random(1000 + seed)
    fid = f"stale-{seed}"
    t = Trial(f"stale{seed}", "polling", fid, db)
    p = spawn(db, *flow_args("polling", fid), "--job-duration", "5m")
    assert "dex" in p.stdout.readline()
    delay = rng.uniform(0.2, 2.6)  # before or after the RUNNING write at 2 s
    time.sleep(delay)
    os.kill(p.pid, signal.SIGSTOP)
    try:
        t.killed = f"SIGSTOP after the header +{delay * 1000:.0f} ms"
        t.pre = snapshot(db, fid, doctor=False)
        t.resume = dex(db, "resume", fid, "--time-skip")
        t.post = snapshot(db, fid)
    finally:
        os.kill(p.pid, signal.SIGCONT)
    t.victim = finish(p, timeout=60)
    t.notes["after_wake"] = snapshot(db, fid)
    return t


PRIORITY = 0  # conftest starts every module's trials at once, lowest first


@once
def start(tmp_path_factory):
    base = tmp_path_factory.mktemp("stale")
    out = {}
    for seed in SEEDS:
        (base / str(seed)).mkdir()
        out[seed] = submit(_trial, seed, base / str(seed) / "dex.db")
    return out


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    return start(tmp_path_factory)


@pytest.mark.parametrize("seed", SEEDS)
def test_stale_owner_is_fenced_after_takeover(seed, trials):
    t: Trial = trials[seed].result()
    why = t.describe()
    assert t.pre.running_attempts(), why  # the frozen process held a lease
    check_recovered(t)
    woke = t.notes["after_wake"]
    assert "Traceback" not in t.victim.stderr, why
    assert woke.flow == t.post.flow, why
    assert woke.steps == t.post.steps, why
    assert woke.attempts == t.post.attempts, why
    assert woke.history == t.post.history, why
    assert woke.messages == t.post.messages, why
    assert woke.problems == [], why
