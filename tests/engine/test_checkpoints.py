"""checkpoints — heartbeat(value) persists, the next attempt reads it, a Stream write
keeps it, heartbeat() clears it, a new step execution starts with none."""

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import pytest

from dexcli import (
    AsyncContext,
    Context,
    FlowStatus,
    Step,
    StepDecision,
    StepOptions,
    StepOutput,
    go_to,
    graceful_complete,
    heartbeat,
)
from tests.engine.engine_flows import PROGRESS, Single
from tests.engine.engine_helpers import step


@dataclass(frozen=True)
class Position:
    page: int
    cursor: str


CLEAR = object()


class Scripted(Step[int]):
    """Async. `script[attempt]` is a list of actions: ("hb", value) / ("hb", CLEAR) /
    ("stream", value); an attempt with a script raises afterwards, the others complete."""

    def __init__(self, script: dict[int, list[tuple[str, Any]]], read_as: Any = Any) -> None:
        self.script = script
        self.read_as = read_as
        self.seen: dict[int, tuple[bool, Any]] = {}

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        self.seen[context.attempt] = (context.has_last_heartbeat_value(),
                                      context.get_last_heartbeat_value(self.read_as))
        actions = self.script.get(context.attempt)
        if actions is None:
            return graceful_complete("done")
        for kind, value in actions:
            if kind == "hb":
                await (context.heartbeat() if value is CLEAR else context.heartbeat(value))
            else:
                PROGRESS.write(context, value)
        raise RuntimeError("fail after the actions")


def run_script(env, script, read_as=Any):
    s = Scripted(script, read_as)
    result = env.run(Single(s), 0, "f")
    assert result.status is FlowStatus.COMPLETED, result
    return s.seen


def test_the_first_attempt_has_no_checkpoint(env):
    assert run_script(env, {})[1] == (False, None)


def test_the_next_attempt_reads_the_checkpoint_typed(env):
    seen = run_script(env, {1: [("hb", Position(3, "abc"))]}, read_as=Position)
    assert seen[2] == (True, Position(3, "abc"))
    assert isinstance(seen[2][1], Position)


def test_the_last_heartbeat_of_the_previous_attempt_wins(env):
    seen = run_script(env, {1: [("hb", 1)], 2: [("hb", 2), ("hb", 3)]}, read_as=int)
    assert seen[2] == (True, 1) and seen[3] == (True, 3)


def test_a_stream_write_keeps_the_last_checkpoint(env):
    seen = run_script(env, {1: [("hb", 5), ("stream", "progress")]}, read_as=int)
    assert seen[2] == (True, 5)
    assert env.stream_values("f") == ["progress"]


def test_heartbeat_without_a_value_clears_the_checkpoint(env):
    seen = run_script(env, {1: [("hb", 5), ("hb", CLEAR)]}, read_as=int)
    assert seen[2] == (False, None)


def test_a_stream_write_keeps_an_explicit_clear(env):
    seen = run_script(env, {1: [("hb", 5), ("hb", CLEAR), ("stream", "x")]}, read_as=int)
    assert seen[2] == (False, None)


def test_none_is_a_present_checkpoint_value(env):
    seen = run_script(env, {1: [("hb", None)]})
    assert seen[2] == (True, None)


def test_the_checkpoint_is_stored_with_the_step_execution(env):
    run_script(env, {1: [("hb", {"k": [1, 2]})]})
    s = step(env, "f", "Scripted-1")
    assert s["hasCheckpoint"] is True and s["lastHeartbeatValue"] == {"k": [1, 2]}


class GenCheckpoint(Step[int]):
    def __init__(self) -> None:
        self.seen: dict[int, Any] = {}

    def execute(self, context: Context, input: int) -> Generator[StepOutput, None, StepDecision]:
        self.seen[context.attempt] = context.get_last_heartbeat_value(Position)
        if context.attempt == 1:
            yield heartbeat(Position(1, "x"))
            yield PROGRESS.write(context, "p")
            raise RuntimeError("fail")
        return graceful_complete("ok")


def test_generator_checkpoint_is_read_by_the_next_attempt(env):
    g = GenCheckpoint()
    env.run(Single(g), 0, "f")
    assert g.seen == {1: None, 2: Position(1, "x")}


class Again(Step[int]):
    """Execution 1 checkpoints and moves to a new execution of itself; that one must see none."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[bool, Any]] = {}

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        self.seen[context.step_execution_id] = (context.has_last_heartbeat_value(),
                                                context.get_last_heartbeat_value(int))
        if input == 0:
            await context.heartbeat(42)
            return go_to(Again, 1)
        return graceful_complete("done")


def test_a_new_step_execution_starts_without_a_checkpoint(env):
    a = Again()
    env.run(Single(a), 0, "f")
    assert a.seen == {"Again-1": (False, None), "Again-2": (False, None)}
    assert step(env, "f", "Again-1")["lastHeartbeatValue"] == 42  # it was stored...
    assert step(env, "f", "Again-2")["hasCheckpoint"] is False  # ...but not carried over


class CheckpointsThenFails(Step[int]):
    def get_step_options(self) -> StepOptions:
        from tests.engine.engine_flows import opts

        return opts(attempts=1).on_execute_failure_proceed_to(SeesNoCheckpoint)

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:
        await context.heartbeat(7)
        raise RuntimeError("boom")


class SeesNoCheckpoint(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete([context.has_last_heartbeat_value(), context.get_last_heartbeat_value(int)])


def test_a_recovery_step_starts_without_a_checkpoint(env):
    result = env.run(Single(CheckpointsThenFails(), SeesNoCheckpoint()), 0, "f")
    assert result.single_output(list) == [False, None]


@pytest.mark.parametrize("value", [0, "", [], False])
def test_falsy_checkpoints_are_present(env, value):
    seen = run_script(env, {1: [("hb", value)]})
    assert seen[2] == (True, value)
