"""SIGKILL at seeded random moments: `dex run` is killed from outside (no crash hook, no last
line), `dex resume ID --time-skip` finishes the flow, and the same rules hold as for the named
crash points — whatever the moment was.

Each seed picks one of:
  polling-real   the polling flow in real time with a 2 s job, killed 0–1.5 s after it started
  polling-skip   the polling flow with --time-skip and a 30 s / 2 m / 5 m job: the victim races
                 through virtual time, so a kill 0–60/150/300 ms in lands anywhere among its
                 polls, Stream writes and checkpoints
  three-real     the three-step flow with a random input, killed 0–30 ms after it started
and now and then kills before the flow was even created (then a fresh `dex run` must work).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from crashkit import Trial, check_recovered, dex, finish, flow_args, once, recover, sigkill, spawn, submit

SEEDS = range(50)


def _plan(seed: int) -> dict:
    rng = random.Random(seed)
    kind = rng.choices(["polling-real", "polling-skip", "three-real"], weights=[3, 4, 3])[0]
    plan = {"kind": kind, "n": rng.randint(-50, 50), "early": rng.random() < 0.08}
    if kind == "polling-real":
        plan.update(args=["--job-duration", "2s"], delay=rng.uniform(0, 1.5))
    elif kind == "polling-skip":
        job, span = rng.choice([("30s", 0.06), ("2m", 0.15), ("5m", 0.3)])  # ~ how long it runs
        plan.update(args=["--time-skip", "--job-duration", job], delay=rng.uniform(0, span))
    else:
        plan.update(args=[], delay=rng.uniform(0, 0.03))
    if plan["early"]:
        plan["delay"] = rng.uniform(0, 0.5)  # from the process start: usually before the flow exists
    return plan


def _trial(seed: int, db: Path) -> Trial:
    plan = _plan(seed)
    flow = "three-steps" if plan["kind"] == "three-real" else "polling"
    fid = f"kill-{seed}"
    t = Trial(f"seed{seed}", flow, fid, db)
    args = flow_args(flow, fid, plan["n"]) + plan["args"]
    p = spawn(db, *args)
    if not plan["early"]:
        header = p.stdout.readline()  # printed once the flow exists, as the engine starts driving it
        assert "dex" in header, finish(p).describe()
    time.sleep(plan["delay"])
    sigkill(p)
    t.victim = finish(p)
    t.killed = (f"{plan['kind']} {' '.join(plan['args'])} n={plan['n']}: SIGKILL "
                f"{'after start' if plan['early'] else 'after the header'} +{plan['delay'] * 1000:.0f} ms, "
                f"exit {t.victim.returncode}")
    if _has_flow(db, fid):
        return recover(t, cli=False)
    # killed before the flow was created: nothing was left behind, a fresh run works
    t.notes["before_start"] = True
    t.victim = dex(db, *args, "--time-skip")
    return recover(t, cli=False)


def _has_flow(db: Path, fid: str) -> bool:
    from contextlib import closing

    from dexcli.store import Store

    if not db.exists():
        return False
    with closing(Store(db)) as s:
        return s.get_flow(fid) is not None


PRIORITY = 1  # conftest starts every module's trials at once, lowest first


@once
def start(tmp_path_factory):
    base = tmp_path_factory.mktemp("sigkill")
    out = {}
    for seed in SEEDS:
        d = base / f"seed{seed}"
        d.mkdir()
        out[seed] = submit(_trial, seed, d / "dex.db")
    return out


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    return start(tmp_path_factory)


@pytest.mark.parametrize("seed", SEEDS)
def test_sigkill_then_resume(seed: int, trials):
    t: Trial = trials[seed].result()
    assert t.victim.returncode in (-9, 0), t.describe()
    check_recovered(t, n=_plan(seed)["n"])
    if t.victim.returncode == -9 and not t.notes.get("before_start"):
        assert t.victim.stderr.strip() == "" or "Traceback" not in t.victim.stderr, t.describe()


def test_kills_landed_mid_flow(trials):
    """The seeds are not all harmless: many kills left an attempt running, and some hit the
    window where a Stream write was not yet checkpointed."""
    done = [f.result() for f in trials.values()]
    mid = [t for t in done if t.pre is not None and t.pre.running_attempts()]
    for t in done:  # shown with -s, or when the assertion below fails
        print(f"{t.name}: {t.killed}; pre {t.pre.status if t.pre else None} "
              f"running={len(t.pre.running_attempts()) if t.pre else 0} progress={t.post.states} "
              f"repeat={t.notes.get('repeat')} allowed={t.notes.get('repeat_allowed')}")
    assert len(mid) >= len(done) // 3, [t.killed for t in done]
    assert any(t.notes.get("repeat_allowed") for t in done), [t.killed for t in done]
