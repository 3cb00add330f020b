"""The engine's face (`from dexcli.engine import Engine`): what the CLI, the clients, the
workers and DexTestEnv call. In virtual time."""

from __future__ import annotations

import pytest

from dexcli import IdReusePolicy, StartFlowOptions
from dexcli.sdk.errors import FlowAlreadyStartedError
from dexcli.store import AttemptOutcome, StepState
from dexcli.testing import DexTestEnv
from dexcli_flows.three_steps import ThreeStepFlow
from tests.engine.engine_flows import Beat, Single, opts


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
    assert env.engine.time_skip(["moved"], 90).moved == {"moved": 90.0}
    assert env.store.flow_offsets(None) == {"moved": 90.0}
