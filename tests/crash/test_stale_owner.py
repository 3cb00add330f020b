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

from tests.crash.crashkit import TEST_TIMEOUT, Trial, Trials, check_recovered, dex, finish, flow_args, snapshot, spawn

pytestmark = pytest.mark.timeout(TEST_TIMEOUT)

SEEDS = range(3)


def _trial(db: Path, seed: int) -> Trial:
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


TRIALS = Trials("stale", priority=0)
for _seed in SEEDS:
    TRIALS.add(f"stale{_seed}", _trial, _seed)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=pytest.mark.trials(f"stale{s}")) for s in SEEDS])
def test_stale_owner_is_fenced_after_takeover(seed, trials):
    t: Trial = trials[f"stale{seed}"]
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
