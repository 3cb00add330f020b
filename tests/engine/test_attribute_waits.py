"""Client.wait_for_attribute_match and wait_for_step_completion in virtual time: the client drives
the flow until the condition holds, then returns (the matched value); a request timeout raises
RequestTimeoutError on the engine's clock; a flow that is missing, closed or closes first raises
FlowNotActiveOrNotFoundError. Attribute values are written as another writer would: a committed
transaction (store + apply_writes), here from an engine listener at a chosen moment."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    AttributeMatch,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RequestTimeoutError,
    Step,
    StepDecision,
    StepExecutionId,
    StepList,
    Timer,
    Wait,
    WaitForAttributeOptions,
    WaitForStepCompletionOptions,
    go_to,
    graceful_complete,
)
from dexcli.client import AsyncClient
from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.sdk.errors import FlowNotActiveOrNotFoundError
from dexcli.testing import DexTestEnv

stage = Attribute("stage", str, index=AttributeIndex(IndexType.KEYWORD, "Stage"))
count = Attribute("count", int)
scores = AttributeMap("scores", float)
hard = Attribute("hard", str, hard_delete_on_null=True)
FOREVER = WaitForAttributeOptions()


class Last(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=3600)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Nap(Step[int]):
    """Waits `input` seconds, then moves to Last (which waits an hour)."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Last, input)  # type: ignore[call-overload, no-any-return]


class NapFlow(Flow[int]):
    def __init__(self) -> None:
        self.nap, self.last = Nap(), Last()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.nap).other_steps(self.last)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(stage, count, scores)  # `hard` is refused before anything is read


def write(env: DexTestEnv, flow_id: str, name: str, value: Any, instance: str | None = None) -> None:
    key = name if instance is None else f"{name}/{instance}"
    index = stage.index if name == "stage" else None
    with env.store.tx() as tx:
        apply_writes(tx, flow_id, {key: AttributeWrite(key, name, instance, json.dumps(value), index)},
                     env.clock.now())


def write_when(env: DexTestEnv, event_type: str, name: str, value: Any) -> None:
    """Commit `name = value` for flow f right after the engine reports `event_type` for it."""
    def on(event: Any) -> None:
        if event.type == event_type and event.flow_id == "f":
            write(env, "f", name, value)

    env.engine.events.listeners.append(on)


@pytest.fixture
def env() -> Any:
    with DexTestEnv(start=0.0) as env:
        env.start(NapFlow(), 600, "f")
        yield env


def test_a_value_that_already_matches_returns_at_once(env: DexTestEnv) -> None:
    write(env, "f", "stage", "paid")
    assert env.client.wait_for_attribute_match("f", stage, AttributeMatch.equal_to("paid"), FOREVER) == "paid"
    assert env.clock.now() == 0.0


def test_the_wait_drives_the_flow_until_a_later_commit_matches(env: DexTestEnv) -> None:
    write(env, "f", "stage", "new")
    write_when(env, "waitCompleted", "stage", "paid")  # Nap's 600 s timer fires
    got = env.client.wait_for_attribute_match("f", stage, match=AttributeMatch.equal_to("paid"), options=FOREVER)
    assert got == "paid"
    assert 600.0 <= env.clock.now() < 3600.0
    assert env.store.get_flow("f").is_running  # type: ignore[union-attr]


@pytest.mark.parametrize(("match", "value", "hit"), [
    (AttributeMatch.equal_to(3), 3, True), (AttributeMatch.equal_to(3), 4, False),
    (AttributeMatch.not_equal_to(3), 4, True), (AttributeMatch.not_equal_to(3), 3, False),
    (AttributeMatch.greater_than(3), 4, True), (AttributeMatch.greater_than(3), 3, False),
    (AttributeMatch.greater_than_or_equal(3), 3, True), (AttributeMatch.less_than(3), 3, False),
    (AttributeMatch.less_than(3), 2, True), (AttributeMatch.less_than_or_equal(3), 3, True),
    (AttributeMatch.less_than_or_equal(3), 4, False),
])
def test_each_operator(env: DexTestEnv, match: AttributeMatch[int], value: int, hit: bool) -> None:
    write(env, "f", "count", value)
    options = WaitForAttributeOptions(request_timeout=timedelta(seconds=5))
    if hit:
        assert env.client.wait_for_attribute_match("f", count, match, options) == value
    else:
        with pytest.raises(RequestTimeoutError):
            env.client.wait_for_attribute_match("f", count, match, options)


def test_a_missing_value_never_matches_not_even_not_equal_to(env: DexTestEnv) -> None:
    options = WaitForAttributeOptions(request_timeout=timedelta(seconds=30))
    with pytest.raises(RequestTimeoutError):
        env.client.wait_for_attribute_match("f", count, AttributeMatch.not_equal_to(1), options)
    assert env.clock.now() == pytest.approx(30.0, abs=0.5)  # virtual: the timeout passed on the engine's clock


def test_a_map_instance(env: DexTestEnv) -> None:
    write(env, "f", "scores", 2.5, instance="alice")
    got = env.client.wait_for_attribute_match("f", scores, "alice", AttributeMatch.greater_than(2), FOREVER)
    assert got == 2.5


def test_the_flow_closing_first_raises_not_active(env: DexTestEnv) -> None:
    with pytest.raises(FlowNotActiveOrNotFoundError):
        env.client.wait_for_attribute_match("f", stage, AttributeMatch.equal_to("never"), FOREVER)
    assert not env.store.get_flow("f").is_running  # type: ignore[union-attr]
    with pytest.raises(FlowNotActiveOrNotFoundError):  # and a closed or missing flow at once
        env.client.wait_for_attribute_match("f", stage, AttributeMatch.equal_to("never"), FOREVER)
    with pytest.raises(FlowNotActiveOrNotFoundError):
        env.client.wait_for_attribute_match("nope", stage, AttributeMatch.equal_to("x"), FOREVER)


@pytest.mark.parametrize(("args", "error"), [
    ((AttributeMatch.equal_to("x"),), TypeError),  # no options
    (("x", FOREVER), TypeError),  # not a match
    ((AttributeMatch.greater_than("x"), FOREVER), ValueError),  # ordering needs a number
    ((AttributeMatch.equal_to(float("nan")), FOREVER), ValueError),
    ((AttributeMatch.equal_to([1]), FOREVER), ValueError),
    ((AttributeMatch.equal_to("x"), WaitForAttributeOptions(request_timeout=timedelta(seconds=1.5))), ValueError),
])
def test_arguments_are_checked_as_the_official_client_checks_them(env: DexTestEnv, args: tuple[Any, ...],
                                                                  error: type[Exception]) -> None:
    with pytest.raises(error):
        env.client.wait_for_attribute_match("f", stage, *args)


def test_a_hard_delete_attribute_and_a_map_without_instance_are_refused(env: DexTestEnv) -> None:
    with pytest.raises(ValueError, match="hard-delete"):
        env.client.wait_for_attribute_match("f", hard, AttributeMatch.equal_to("x"), FOREVER)
    with pytest.raises(TypeError):
        env.client.wait_for_attribute_match("f", scores, AttributeMatch.equal_to(1.0), FOREVER)


def test_wait_for_step_completion_drives_until_that_execution_ends(env: DexTestEnv) -> None:
    env.client.wait_for_step_completion("f", StepExecutionId("Nap", 1), WaitForStepCompletionOptions())
    assert 600.0 <= env.clock.now() < 3600.0
    now = env.clock.now()
    env.client.wait_for_step_completion("f", StepExecutionId("Nap", 1), WaitForStepCompletionOptions())
    assert env.clock.now() == now  # it has ended: at once
    with pytest.raises(RequestTimeoutError):
        env.client.wait_for_step_completion("f", StepExecutionId("Last", 1),
                                            WaitForStepCompletionOptions(request_timeout=timedelta(seconds=60)))
    with pytest.raises(FlowNotActiveOrNotFoundError):  # Last-2 never comes: the flow completes first
        env.client.wait_for_step_completion("f", StepExecutionId("Last", 2), WaitForStepCompletionOptions())


def test_the_async_client_polls_while_the_engine_runs_on_its_loop(env: DexTestEnv) -> None:
    client = AsyncClient(engine=env.engine)
    write_when(env, "waitCompleted", "stage", "paid")

    async def main() -> Any:
        runner = asyncio.ensure_future(env.engine.drive_async(
            ["f"], until_idle=False, until=lambda: env.store.get_flow("f").status.value != "RUNNING", release=False))
        got = await client.wait_for_attribute_match("f", stage, AttributeMatch.equal_to("paid"), FOREVER)
        await client.wait_for_step_completion("f", StepExecutionId("Nap", 1), WaitForStepCompletionOptions())
        with pytest.raises(RequestTimeoutError):
            await client.wait_for_step_completion("f", StepExecutionId("Last", 1), WaitForStepCompletionOptions(
                request_timeout=timedelta(seconds=10)))
        await runner
        return got

    from dexcli.engine.clock import run as run_on_clock

    assert run_on_clock(main, env.clock) == "paid"


WRITER = """
import json, sys
from dexcli.engine.attributes import AttributeWrite, apply_writes
from dexcli.store import Store
store = Store(sys.argv[1])
with store.tx() as tx:
    apply_writes(tx, "f", {"count": AttributeWrite("count", "count", None, json.dumps(7), None)}, 0.0)
"""


def test_a_real_time_client_sees_a_value_another_process_commits(tmp_path: Any) -> None:
    import subprocess
    import sys

    from dexcli import Client
    from dexcli.engine.clock import Clock

    db = tmp_path / "dex.db"
    with Client([NapFlow()], db=db, clock=Clock()) as client:
        with client.store.tx() as tx:  # a running flow another process drives (no step here to run)
            tx.insert_flow_if_new("f", "run-f", "NapFlow", None, "600", "req-f", 0.0)
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], env=env)
        try:
            got = client.wait_for_attribute_match("f", count, AttributeMatch.greater_than(5), WaitForAttributeOptions(
                request_timeout=timedelta(seconds=30)))
        finally:
            writer.wait(timeout=30)
    assert got == 7
