"""`Engine.start_flow(lease=True)`: the start leases its first attempt, in its own transaction,
to the next run() of this engine, which starts it at once without a claim (what `dex run` and the
sequential bench do). Starts that create no run, or whose step is not due yet, lease nothing; a
lease nobody drives is given back, or declared lost at its heartbeat deadline like a crashed
owner's. In virtual time; the real-process crash is in tests/crash/test_start_lease_crash.py."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    AsyncContext,
    FlowErrorType,
    FlowStatus,
    IdReusePolicy,
    StartFlowOptions,
    Step,
    StepDecision,
    graceful_complete,
)
from dexcli.engine.core import Engine
from dexcli.store import AttemptOutcome, StepState
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_flows import Beat, Flaky, Single, opts


def drive(engine: Engine, *flow_ids: str) -> None:
    engine.drive(list(flow_ids), until_idle=True)


def statements(env: DexTestEnv) -> list[str]:
    """Every statement the engine's connection runs from now on (appended as they run)."""
    seen: list[str] = []
    env.store._conn.set_trace_callback(lambda s: seen.append(" ".join(s.split())))
    return seen


def test_the_start_commits_the_lease_and_the_next_run_starts_it_without_a_claim(env: DexTestEnv) -> None:
    commits = env.store.commits
    env.engine.start_flow(ThreeStepFlow(), "f", 1, lease=True)
    assert env.store.commits == commits + 1
    first = env.store.steps_of("f")[0]
    assert first.status is StepState.RUNNING and first.attempt == 1
    attempt = env.store.attempts_of("f")[0]
    assert attempt.start_time == env.store.get_flow("f").start_time  # type: ignore[union-attr]
    seen = statements(env)
    drive(env.engine, "f")
    assert env.result("f").single_output(int) == 7
    assert env.store.commits == commits + 4  # the start and three completions: no claim transaction
    assert not any("UPDATE steps SET status = 'RUNNING'" in s for s in seen)  # nothing leased by a claim
    assert sum(s.startswith("SELECT 0, NULL, MIN(") for s in seen) == 0  # no schedule read either
    owners = {a.owner for a in env.store.attempts_of("f")}
    assert owners == {attempt.owner}  # the run leased the next steps under the owner the start used


def test_a_drive_of_only_leased_starts_reads_no_descendants(env: DexTestEnv) -> None:
    """A flow whose start leased its first attempt to the drive has no SubFlow yet (its start
    step has not run, and its id was new), so the drive does not look for its children; a drive
    of a flow started without a lease still does."""
    env.engine.start_flow(ThreeStepFlow(), "f", 1, lease=True)
    seen = statements(env)
    drive(env.engine, "f")
    assert env.result("f").single_output(int) == 7
    assert not any("WHERE parent_flow_id IN" in s for s in seen)
    env.engine.start_flow(ThreeStepFlow(), "g", 1)
    seen.clear()
    drive(env.engine, "g")
    assert env.result("g").single_output(int) == 7
    assert sum("WHERE parent_flow_id IN" in s for s in seen) == 1


def test_owner_ids_keep_their_form(env: DexTestEnv) -> None:
    """Each drive with nothing left in memory leases under a new owner: the engine's base, a
    colon and six random hex digits (another drive's leases are then foreign to it)."""
    owners = set()
    for i in range(3):
        env.engine.start_flow(ThreeStepFlow(), f"o{i}", 1, lease=True)
        drive(env.engine, f"o{i}")
        owners |= {a.owner for a in env.store.attempts_of(f"o{i}")}
    assert len(owners) == 3
    for owner in owners:
        base, _, tail = owner.rpartition(":")
        assert base and len(tail) == 6 and int(tail, 16) >= 0


def test_without_lease_the_run_claims_the_start_step(env: DexTestEnv) -> None:
    commits = env.store.commits
    env.engine.start_flow(ThreeStepFlow(), "f", 1)
    assert env.store.steps_of("f")[0].status is StepState.QUEUED
    drive(env.engine, "f")
    assert env.store.commits == commits + 5


def test_flows_started_and_driven_one_after_another_all_complete(env: DexTestEnv) -> None:
    for i in range(5):
        env.engine.start_flow(ThreeStepFlow(), f"f{i}", i, lease=True)
        drive(env.engine, f"f{i}")
    assert [env.result(f"f{i}").single_output(int) for i in range(5)] == [2 * (i + 1) + 3 for i in range(5)]
    assert all(a.attempt == 1 for i in range(5) for a in env.store.attempts_of(f"f{i}"))


def test_a_start_delay_is_not_leased_early(env: DexTestEnv) -> None:
    delay = StartFlowOptions(start_delay=timedelta(seconds=30))
    env.engine.start_flow(Single(Flaky()), "f", 1, options=delay, lease=True)
    step = env.store.steps_of("f")[0]
    assert step.status is StepState.QUEUED and step.lease_owner is None
    assert env.store.attempts_of("f") == []
    drive(env.engine, "f")
    assert env.result("f").single_output(int) == 1
    assert env.store.attempts_of("f")[0].start_time - env.store.get_flow("f").start_time == 30  # type: ignore[union-attr]


def test_a_start_that_creates_no_run_leases_nothing(env: DexTestEnv) -> None:
    options = StartFlowOptions(request_id="r1", ignore_already_started=True)
    run_id = env.engine.start_flow(Single(Flaky()), "f", 1, options=options)
    assert env.engine.start_flow(Single(Flaky()), "f", 1, options=options, lease=True) == run_id
    assert env.store.steps_of("f")[0].status is StepState.QUEUED
    drive(env.engine, "f")
    assert env.result("f").single_output(int) == 1  # one attempt: the second start leased nothing


def test_a_reused_id_is_not_leased_at_once(env: DexTestEnv) -> None:
    env.engine.start_flow(Single(Flaky()), "f", 1, lease=True)
    drive(env.engine, "f")
    reuse = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING)
    env.engine.start_flow(Single(Flaky()), "f", 2, options=reuse, lease=True)
    assert env.store.steps_of("f")[0].status is StepState.QUEUED
    drive(env.engine, "f")
    assert env.result("f").status is FlowStatus.COMPLETED


def test_a_flow_timeout_still_fires_for_a_leased_start(env: DexTestEnv) -> None:
    slow = Single(Beat(opts(heartbeat=30), every=10, finish_after=300))
    env.engine.start_flow(slow, "f", 1, options=StartFlowOptions(timeout=timedelta(seconds=60)), lease=True)
    drive(env.engine, "f")
    result = env.result("f")
    assert result.error_type is FlowErrorType.FLOW_TIMEOUT
    assert env.store.get_flow("f").close_time - env.store.get_flow("f").start_time == 60  # type: ignore[union-attr]


def test_a_run_that_does_not_drive_the_flow_gives_its_lease_back(env: DexTestEnv) -> None:
    env.engine.start_flow(Single(Flaky()), "f", 1, lease=True)
    env.engine.start_flow(ThreeStepFlow(), "g", 1)
    drive(env.engine, "g")
    step = env.store.steps_of("f")[0]
    assert step.status is StepState.QUEUED and step.lease_owner is None  # runnable at once
    assert step.attempt == 0 and env.store.attempts_of("f") == []  # nothing ran: nothing recorded
    t = env.clock.now()
    drive(env.engine, "f")
    assert env.result("f").status is FlowStatus.COMPLETED
    assert env.clock.now() == t  # no heartbeat timeout was waited for


def test_release_interrupted_gives_back_a_lease_never_driven(env: DexTestEnv) -> None:
    """A lease given back is not an INTERRUPTED attempt: that attempt never began."""
    env.engine.start_flow(Single(Flaky()), "f", 1, lease=True)
    assert env.engine.release() == 0  # no attempt ended INTERRUPTED
    step = env.store.steps_of("f")[0]
    assert (step.status, step.attempt, step.lease_owner, step.first_attempt_at) == (StepState.QUEUED, 0, None, None)
    assert env.store.attempts_of("f") == []
    assert env.engine.release() == 0
    drive(env.engine, "f")
    assert [a.attempt for a in env.store.attempts_of("f")] == [1]  # the first attempt is the one that runs
    assert env.result("f").single_output(int) == 1


@pytest.mark.parametrize("flow", [Single(Beat(opts(heartbeat=30), every=10, finish_after=20)), Single(Flaky())],
                         ids=["task", "sync-callbacks"])
def test_an_attempt_stopped_before_its_first_step_is_given_back_not_interrupted(env: DexTestEnv,
                                                                                flow: Any) -> None:
    """Ctrl-C lands after the run started the held attempt (a task, or a sync handler's
    callback) but before the attempt began: it is given back, not recorded INTERRUPTED."""
    env.engine.start_flow(flow, "f", 1, lease=True)
    scheduler = env.engine._scheduler
    hooks = scheduler.h
    started = hooks.start_attempt

    def start_then_ctrl_c(leased: Any, now: float) -> None:
        started(leased, now)
        raise KeyboardInterrupt

    scheduler.h = dataclasses.replace(hooks, start_attempt=start_then_ctrl_c)  # how the run starts the held one
    with pytest.raises(KeyboardInterrupt):
        env.engine.drive(["f"], until_idle=True)
    scheduler.h = hooks
    assert env.engine.release() == 0
    first = env.store.steps_of("f")[0]
    assert (first.status, first.attempt) == (StepState.QUEUED, 0) and env.store.attempts_of("f") == []


def test_a_lease_nobody_drives_is_declared_lost_at_its_heartbeat_deadline(env: DexTestEnv) -> None:
    """The starting process goes away (another engine on the same database plays its successor)."""
    flow = Single(Flaky(opts(heartbeat=30)))
    env.engine.start_flow(flow, "f", 1, lease=True)
    successor = Engine(env.store, env.clock, owner="successor:1")
    successor.definitions.registry.add(flow)
    drive(successor, "f")
    assert env.result("f").single_output(int) == 2  # the second attempt completed
    first, second = env.store.attempts_of("f")
    assert first.outcome is AttemptOutcome.LOST and second.outcome is AttemptOutcome.COMPLETED
    assert first.end_time - first.start_time == 30  # type: ignore[operator]


class Target(Single):
    def __init__(self) -> None:
        super().__init__(Flaky())


class StartsAgain(Step[int]):
    """Async: after a second, starts flow `b` again (a new run under its id, due in 10 s), then completes."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await asyncio.sleep(1)
        reuse = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_IF_NOT_RUNNING, start_delay=timedelta(seconds=10))
        await self.client.start_flow(Target(), "b", 5, reuse)
        return graceful_complete(input)


def test_until_idle_drives_a_new_run_started_after_its_flow_closed_here(env: DexTestEnv) -> None:
    env.engine.start_flow(Single(StartsAgain(AsyncClient(engine=env.engine))), "a", 1, lease=True)
    env.engine.start_flow(Target(), "b", 1)
    drive(env.engine, "a", "b")  # b's first run closes, then a starts a second one, then a closes
    assert env.result("a").status is FlowStatus.COMPLETED
    assert env.store.get_flow("b").input == "5"  # type: ignore[union-attr]
    assert env.result("b").status is FlowStatus.COMPLETED


def test_a_leasing_start_sets_up_decoding_before_its_lease_is_taken(env: DexTestEnv,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding's one-off set-up (pydantic's import and a validator per input type: ~0.3 s in a
    fresh `dex run`) runs before the start commits the lease, so it is not counted in the first
    attempt's time, which starts with the lease."""
    seen: list[bool] = []
    prepare = env.engine.definitions.prepare

    def spy() -> None:
        seen.append(env.store.get_flow("f") is None)
        prepare()

    monkeypatch.setattr(env.engine.definitions, "prepare", spy)
    env.engine.start_flow(ThreeStepFlow(), "f", 1, lease=True)
    assert seen == [True]  # once, while nothing of the flow was written yet
    drive(env.engine, "f")
    assert env.result("f").single_output(int) == 7
