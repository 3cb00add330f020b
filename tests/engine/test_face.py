"""The engine's face (`from dexcli.engine import Engine`): what the CLI, the clients, the
workers and DexTestEnv call. In virtual time."""

from __future__ import annotations

import dataclasses

import pytest

from dexcli import IdReusePolicy, StartFlowOptions
from dexcli.engine import Activity, TimeSkip
from dexcli.sdk.errors import FlowAlreadyStartedError
from dexcli.store import AttemptOutcome, StepState
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_flows import Beat, Flaky, Single, opts


def test_a_start_runs_its_setup_before_it_commits_and_never_for_a_refused_flow_id(env: DexTestEnv) -> None:
    seen: list[object] = []
    env.engine.start_flow(ThreeStepFlow(), "f", 1, setup=lambda: seen.append(env.store.get_flow("f")))
    assert seen == [None]  # the plugin's before_start ran before the flow existed
    with pytest.raises(FlowAlreadyStartedError, match="flow f already exists"):
        env.engine.start_flow(ThreeStepFlow(), "f", 1, setup=lambda: seen.append("refused"))
    assert seen == [None]  # a refused start sets nothing up
    replace = StartFlowOptions(id_reuse_policy=IdReusePolicy.ALLOW_TERMINATE_IF_RUNNING)
    env.engine.start_flow(ThreeStepFlow(), "f", 2, options=replace, setup=lambda: seen.append("replaces"))
    assert seen == [None, "replaces"]


def test_a_drive_releases_what_it_leaves_or_leaves_that_to_release(env: DexTestEnv) -> None:
    forever = Single(Beat(opts(heartbeat=60), every=5))
    env.start(forever, 0, "kept")
    drove = env.engine.drive(["kept"], deadline=env.t0 + 20, release=False)
    assert drove.released == 0 and drove.skipped == {}
    assert env.store.steps_of("kept")[0].status is StepState.RUNNING  # still leased: the caller releases
    assert env.engine.release() == 1
    assert [a.outcome for a in env.store.attempts_of("kept")] == [AttemptOutcome.INTERRUPTED]
    assert env.store.steps_of("kept")[0].status is not StepState.RUNNING

    env.start(forever, 0, "released")
    drove = env.engine.drive(["released"], deadline=env.clock.now() + 20)
    assert drove.released == 1
    assert [a.outcome for a in env.store.attempts_of("released")] == [AttemptOutcome.INTERRUPTED]
    assert env.engine.release() == 0  # nothing left


def test_time_skip_moves_the_named_flows_clocks(env: DexTestEnv) -> None:
    env.start(Single(Beat(opts(heartbeat=60), every=5)), 0, "moved")
    env.start(Single(Beat(opts(heartbeat=60), every=5)), 0, "kept")
    assert env.engine.change(TimeSkip(("moved",), 90)).moved == {"moved": 90.0}  # what `dex time skip` calls
    assert env.store.flow_offsets(None) == {"moved": 90.0}


def test_activity_is_a_frozen_snapshot_of_the_counters_and_of_the_attempts_held_here(env: DexTestEnv) -> None:
    start = env.engine.activity()
    assert start.running == () and start.of("held", "Beat-1") is None
    env.start(Single(Beat(opts(heartbeat=60), every=5)), 0, "held")
    during: list[Activity] = []  # read from a listener, as the drive goes on
    env.engine.events.listeners.append(lambda e: during.append(env.engine.activity()))
    env.engine.drive(["held"], deadline=env.t0 + 20, release=False)
    env.engine.events.listeners.clear()
    held = during[-1]
    [here] = held.running
    assert (here.flow_id, here.step_execution_id, here.attempt) == ("held", "Beat-1", 1)
    assert here.on_thread is False and here.began  # an async handler: a task on the loop
    assert held.of("held", "Beat-1") == here
    assert held.attempts == start.attempts + 1  # begun; nothing ended or closed yet
    assert (held.transitions, held.flows_closed) == (start.transitions, start.flows_closed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        held.transitions = 0  # type: ignore[misc]
    after = env.engine.activity()
    assert after.running == () and held.running == (here,)  # the drive stopped it; a snapshot stays
    assert env.engine.activity(running=False) == dataclasses.replace(after, running=())  # the counters alone
    assert env.engine.release() == 1

    seen: list[object] = []  # a plain sync step is run to completion on a handler thread
    env.engine.events.listeners.append(lambda e: seen.append(env.engine.activity().of(e.flow_id, "Flaky-1"))
                                       if e.type == "attemptStarted" and e.flow_id == "sync" else None)
    env.run(Once(Flaky()), 0, "sync")
    [on_thread] = seen
    assert on_thread is not None and on_thread.on_thread is True and on_thread.attempt == 1
    done = env.engine.activity()
    assert done.flows_closed == held.flows_closed + 1 and done.attempts == held.attempts + 1
    assert done.transitions == held.transitions + 1  # its outcome, which closed the flow
    assert done.running == ()


class Once(Single):
    """Its own flow type (a registry keeps one definition per type)."""
