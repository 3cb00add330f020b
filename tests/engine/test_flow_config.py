"""FlowConfig, as the server applies it (flowConfiger.go), in virtual time: given at start
(`StartFlowOptions(config_override=...)`), merged by `update_flow_config` (sync and async
clients), kept on the flow and shown as `state.flowConfig`; `step_durability` as the default
durability of methods (method override → FlowConfig → SYNC; a method with a failure route SYNC
whatever the FlowConfig says); the values Dex refuses, and `worker_target`, refused loudly."""

from __future__ import annotations

import asyncio
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    ActiveStepSearchMode,
    AsyncClient,
    AsyncContext,
    Context,
    DexServiceError,
    Flow,
    FlowConfig,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    StartFlowOptions,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    Timer,
    Wait,
    go_to,
    go_to_many,
    graceful_complete,
)
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.testing import DexTestEnv
from tests.attrstore.stores import config, sqlite_store

SEEN: list[tuple[str, dict[str, str]]] = []  # (step, the status of each step another connection sees)


def durable_steps(db: Path, flow_id: str) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute("SELECT step_execution_id, status FROM steps WHERE flow_id = ?", (flow_id,)))
    finally:
        conn.close()


def chain(db: Path, a_options: StepOptions | None = None, on_b: Any = None) -> Flow[int]:
    """A → B → C; each step records what another process sees as it starts."""

    class Looking(Step[int]):
        def look(self, context: Context) -> None:
            SEEN.append((type(self).__name__, durable_steps(db, context.flow_id)))

    class Recover(Step[None]):
        def execute(self, context: Context, input: None) -> StepDecision:
            return graceful_complete(-1)

    class C(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return graceful_complete(n + 3)

    class B(Looking):
        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            if on_b is not None:
                on_b(context)
            return go_to(C, n * 2)

    class A(Looking):
        def get_step_options(self) -> StepOptions:
            opts = a_options or StepOptions()
            return opts.on_execute_failure_proceed_to(Recover) if a_options is RECOVERING else opts

        def execute(self, context: Context, n: int) -> StepDecision:
            self.look(context)
            return go_to(B, n + 1)

    class Chain(Flow[int]):
        def get_steps(self) -> StepList[int]:
            return StepList.start_step(A()).other_steps(B(), C(), Recover())

    return Chain()


RECOVERING = StepOptions()  # marker: A gets a failure route (on_execute_failure_proceed_to)


def run_chain(env: DexTestEnv, db: Path, config: FlowConfig | None, a_options: StepOptions | None = None,
              on_b: Any = None) -> None:
    SEEN.clear()
    env.client.start_flow(chain(db, a_options, on_b), "f", 1, StartFlowOptions(config_override=config))
    assert env.client.wait_for_flow("f").single_output(int) in (7, -1)


A_DURABLE_AT_B = ("B", {"A-1": "COMPLETED", "B-1": "RUNNING"})
A_NOT_YET_AT_B = ("B", {"A-1": "RUNNING"})


def test_step_durability_async_is_the_default_of_every_method(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        run_chain(env, db, FlowConfig(step_durability=StepDurability.ASYNC))
        assert SEEN[1] == A_NOT_YET_AT_B  # B ran before A's result was durable
        assert durable_steps(db, "f") == {"A-1": "COMPLETED", "B-1": "COMPLETED", "C-1": "COMPLETED"}


@pytest.mark.parametrize("config", [None, FlowConfig(), FlowConfig(step_durability=StepDurability.SYNC),
                                    FlowConfig(step_durability=StepDurability.DEFAULT)])
def test_without_an_async_flow_config_every_method_is_sync(tmp_path: Path, config: FlowConfig | None) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        run_chain(env, db, config)
        assert SEEN[1] == A_DURABLE_AT_B


def test_a_methods_own_durability_wins_over_the_flow_config(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        run_chain(env, db, FlowConfig(step_durability=StepDurability.ASYNC),
                  StepOptions(execute_durability=StepDurability.SYNC))
        assert SEEN[1] == A_DURABLE_AT_B  # A said SYNC
        assert SEEN[2][0] == "C" and SEEN[2][1].get("B-1") == "RUNNING"  # B took the flow's ASYNC


def test_a_method_with_a_failure_route_is_sync_whatever_the_flow_config_says(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        run_chain(env, db, FlowConfig(step_durability=StepDurability.ASYNC), RECOVERING)
        assert SEEN[1] == A_DURABLE_AT_B


def test_an_update_changes_the_durability_of_the_methods_leased_after_it(tmp_path: Path) -> None:
    db = tmp_path / "dex.db"
    with DexTestEnv(db) as env:
        def to_async(context: Context) -> None:
            env.client.update_flow_config(context.flow_id, FlowConfig(step_durability=StepDurability.ASYNC))

        run_chain(env, db, None, on_b=to_async)
        # B was leased before the update: SYNC, so C saw it committed
        assert SEEN[2] == ("C", {"A-1": "COMPLETED", "B-1": "COMPLETED", "C-1": "RUNNING"})
        assert env.inspect("f")["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_ASYNC"}


# --- kept, merged, shown -----------------------------------------------------------------------

class Idle(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("done")


class IdleFlow(Flow[None]):
    """A flow with no start step: RUNNING until stopped."""

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(Idle())


def test_the_override_is_kept_with_the_flow_and_shown_as_state_flow_config(tmp_path: Path) -> None:
    with DexTestEnv() as env:
        env.engine.use_attribute_stores(config(orders=sqlite_store(tmp_path / "orders.db")))  # a store it names
        env.client.start_flow(IdleFlow(), "f", None, StartFlowOptions(config_override=FlowConfig(
            continue_as_new_threshold=50, active_step_search_mode=ActiveStepSearchMode.ALL,
            attribute_store_names=["orders"])))
        state = env.inspect("f")["state"]
        assert state["flowConfig"] == {
            "stepDurability": "STEP_DURABILITY_SYNC", "continueAsNewThreshold": 50,
            "activeStepSearchMode": "ACTIVE_STEP_SEARCH_MODE_ENABLED_FOR_ALL",
            "attributeStoreNames": {"names": ["orders"]}}
        flow = env.store.get_flow("f")
        assert flow is not None and flow.attribute_store_names == ["orders"]


def test_a_flow_without_a_config_shows_dex_defaults_and_has_no_store_names() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(IdleFlow(), "f", None)
        assert env.inspect("f")["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
        flow = env.store.get_flow("f")
        assert flow is not None and flow.attribute_store_names is None and flow.flow_config is None


def test_update_merges_the_fields_it_sets_and_keeps_the_others(tmp_path: Path) -> None:
    with DexTestEnv() as env:
        env.engine.use_attribute_stores(config(orders=sqlite_store(tmp_path / "orders.db")))  # a store it names
        env.client.start_flow(IdleFlow(), "f", None, StartFlowOptions(config_override=FlowConfig(
            continue_as_new_threshold=50, attribute_store_names=["orders"])))
        env.client.update_flow_config("f", FlowConfig(step_durability=StepDurability.ASYNC,
                                                      continue_as_new_page_size_bytes=2048))
        env.client.update_flow_config("f", FlowConfig(attribute_store_names=[]))  # [] turns projections off
        assert env.inspect("f")["state"]["flowConfig"] == {
            "stepDurability": "STEP_DURABILITY_ASYNC", "continueAsNewThreshold": 50,
            "continueAsNewPageSizeInBytes": 2048, "attributeStoreNames": {}}
        flow = env.store.get_flow("f")
        assert flow is not None and flow.attribute_store_names == []
        env.client.update_flow_config("f", FlowConfig())  # nothing set: nothing changes
        assert env.inspect("f")["state"]["flowConfig"]["continueAsNewThreshold"] == 50


def test_the_async_client_updates_too() -> None:
    with DexTestEnv() as env:
        env.client.start_flow(IdleFlow(), "f", None)

        async def update() -> None:
            async with AsyncClient(engine=env.engine) as client:
                await client.update_flow_config("f", FlowConfig(continue_as_new_threshold=7))

        asyncio.run(update())
        assert env.inspect("f")["state"]["flowConfig"]["continueAsNewThreshold"] == 7


def test_update_of_a_closed_or_missing_flow_is_refused() -> None:
    with DexTestEnv() as env:
        env.run(Single(), None, "done")
        with pytest.raises(FlowNotActiveOrNotFoundError, match="COMPLETED"):
            env.client.update_flow_config("done", FlowConfig(continue_as_new_threshold=1))
        with pytest.raises(FlowNotActiveOrNotFoundError, match="not found"):
            env.client.update_flow_config("nope", FlowConfig(continue_as_new_threshold=1))


class Single(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Idle())


# --- refused -------------------------------------------------------------------------------

class Target:
    address = "worker-canary:8803"


@pytest.mark.parametrize("config, error, message", [
    (FlowConfig(worker_target=Target()), NotSupportedYetError, "worker_target"),
    (FlowConfig(continue_as_new_threshold=-1), ValueError, "continue_as_new_threshold must be >= 0"),
    (FlowConfig(continue_as_new_page_size_bytes=-5), ValueError, "continue_as_new_page_size_bytes must be >= 0"),
    (FlowConfig(continue_as_new_page_size_bytes=64 * 1024 * 1024), ValueError, "at most"),
    (FlowConfig(continue_as_new_threshold="10"), TypeError, "takes an int"),  # type: ignore[arg-type]
    (FlowConfig(step_durability="ASYNC"), TypeError, "StepDurability"),  # type: ignore[arg-type]
    (FlowConfig(attribute_store_names="orders"), TypeError, "list of non-empty names"),  # type: ignore[arg-type]
])
def test_what_dex_cannot_do_or_dex_refuses_is_refused_at_start_and_at_update(
        config: FlowConfig, error: type[Exception], message: str) -> None:
    with DexTestEnv() as env:
        with pytest.raises(error, match=message):
            env.client.start_flow(IdleFlow(), "f", None, StartFlowOptions(config_override=config))
        assert env.store.get_flow("f") is None  # nothing was written
        env.client.start_flow(IdleFlow(), "g", None)
        with pytest.raises(error, match=message):
            env.client.update_flow_config("g", config)
        assert env.inspect("g")["state"]["flowConfig"] == {"stepDurability": "STEP_DURABILITY_SYNC"}
        assert env.result("g").status is FlowStatus.RUNNING


# --- active_step_search_mode: what ActiveStepTypes finds ---------------------------------------

class Parked(Step[None]):
    """Waits on a timer for a day: active, with a wait_for."""

    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.all_of(Timer.by_duration(timedelta(days=1)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return graceful_complete("parked")


class Working(Step[None]):
    """Runs for two days: active, no wait_for."""

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # type: ignore[override]
        await asyncio.sleep(2 * 86400)
        return graceful_complete("worked")


class Both(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to_many(StepMovement.of(Parked, None), StepMovement.of(Slow, None))


class Slow(Step[None]):
    def wait_for(self, context: Context, input: None) -> Wait:
        return Wait.all_of(Timer.by_duration(timedelta(hours=1)))

    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(Working, None)


class Mixed(Flow[None]):
    def get_steps(self) -> StepList[None]:
        return StepList.start_step(Both()).other_steps(Parked(), Slow(), Working())


def test_active_step_types_finds_the_steps_the_search_mode_indexes() -> None:
    with DexTestEnv() as env:
        for flow_id, mode in (("default", None), ("with", ActiveStepSearchMode.WITH_WAIT_FOR),
                              ("all", ActiveStepSearchMode.ALL), ("off", ActiveStepSearchMode.DISABLED)):
            env.client.start_flow(Mixed(), flow_id, None, StartFlowOptions(
                config_override=None if mode is None else FlowConfig(active_step_search_mode=mode)))
        # Slow's timer fires after an hour: it goes on to Working (no wait_for), which works for two
        # days; Parked waits for one
        env.drive(until=lambda: all(any(s["stepType"] == "Working" for s in env.inspect(f)["steps"])
                                    for f in ("default", "with", "all", "off")), poll=600)

        def found(query: str) -> list[str]:
            return sorted(e.flow_id for e in env.client.search_flows(query, 10).flows)

        assert found("ActiveStepTypes = 'Parked'") == ["all", "default", "with"]
        assert found("ActiveStepTypes = 'Working'") == ["all"]  # only ALL indexes a step without wait_for
        assert found("ActiveStepTypes IN ('Working', 'Parked')") == ["all", "default", "with"]
        assert found("ActiveStepTypes != 'Parked'") == []
        assert found("ActiveStepTypes STARTS_WITH 'Par'") == ["all", "default", "with"]
        assert found("ActiveStepTypes IS NULL") == ["off"]
        env.client.update_flow_config("off", FlowConfig(active_step_search_mode=ActiveStepSearchMode.ALL))
        assert found("ActiveStepTypes = 'Working'") == ["all", "off"]
        with pytest.raises(DexServiceError, match="a keyword array does not sort"):
            env.client.search_flows("ORDER BY ActiveStepTypes", 10)
        with pytest.raises(DexServiceError, match="takes =, !="):
            env.client.search_flows("ActiveStepTypes > 'A'", 10)
