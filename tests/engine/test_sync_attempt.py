"""Attempts of plain sync `execute` handlers run without a task (dexcli.engine.sync_attempt):
a timeout while the handler is in its thread, a fence while it waits for its thread or its
commit, and a stop with such attempts in flight keep the task path's rules."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from dexcli import (
    Context,
    Flow,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    StepOptions,
    force_complete,
    go_to_many,
    graceful_complete,
)
from dexcli.engine import StopFlow, transitions
from dexcli.engine.attempt import AttemptRun
from dexcli.engine.events import Event
from dexcli.engine.faults import Faults
from dexcli.testing import DexTestEnv
from tests.engine.engine_flows import opts


class Held(Step[int]):
    """Sync. Each call runs `on_call(attempt)` in its thread; the attempts in `hold` then block
    until `release` is set."""

    def __init__(self, options: StepOptions, hold: tuple[int, ...] = (1,)) -> None:
        self.options = options
        self.hold = hold
        self.release = threading.Event()
        self.on_call: Callable[[int], None] = lambda attempt: None

    def get_step_options(self) -> StepOptions:
        return self.options

    def execute(self, context: Context, input: int) -> StepDecision:
        self.on_call(context.attempt)
        if context.attempt in self.hold:
            assert self.release.wait(30), "never released"
        return graceful_complete(input + context.attempt)


class HeldFlow(Flow[int]):
    def __init__(self, step: Held) -> None:
        self.step = step

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.step)


class Blocker(Held):
    pass


class BlockerFlow(HeldFlow):
    pass


def callback_driven(env: DexTestEnv) -> dict[str, Any]:
    """Record the loop; fail the test if an attempt gets a task (this path would be untested)."""
    seen: dict[str, Any] = {}

    def started(ev: Event) -> None:
        if ev.type == "attemptStarted":
            run = env.engine.activity().of(ev.flow_id, ev.data["stepExecutionId"])
            assert run is not None and run.on_thread
            seen["loop"] = asyncio.get_running_loop()

    env.engine.events.listeners.append(started)
    return seen


def outcomes(env: DexTestEnv, flow_id: str) -> list[str]:
    [step] = env.inspect(flow_id)["steps"]
    return [a["outcome"] for a in step["attempts"]]


def no_completion(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count applied completions: a fenced attempt's unit must be skipped, never applied."""
    applied: list[str] = []
    real = transitions.complete_execute

    def spy(*args: Any, **kwargs: Any) -> Any:
        applied.append(args[1].seid)
        return real(*args, **kwargs)

    monkeypatch.setattr(transitions, "complete_execute", spy)
    return applied


def test_a_timeout_while_the_handler_is_in_its_thread_is_committed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    applied = no_completion(monkeypatch)
    step = Held(opts(timeout=20, attempts=2, initial=1))
    with DexTestEnv() as env:
        callback_driven(env)

        def on_call(attempt: int) -> None:
            if attempt == 1:
                env.clock.advance(100)  # past its StartToClose while it is still in its thread
            else:
                step.release.set()  # attempt 2 runs only once attempt 1's timeout is committed

        step.on_call = on_call
        result = env.run(HeldFlow(step), 10, "f")
        assert result.single_output(int) == 12  # attempt 1's late result was ignored
        assert outcomes(env, "f") == ["TIMED_OUT", "COMPLETED"]
        assert applied == ["Held-1"]  # attempt 2's decision only
        assert not env.engine.activity().running


def test_fenced_while_in_its_thread_commits_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    applied = no_completion(monkeypatch)
    step = Held(opts(attempts=1))
    with DexTestEnv() as env:
        seen = callback_driven(env)

        def closed(ev: Event) -> None:
            if ev.type == "flowClosed":
                step.release.set()  # the handler returns only after the fence

        env.engine.events.listeners.append(closed)
        step.on_call = lambda attempt: seen["loop"].call_soon_threadsafe(env.engine.change, StopFlow("f"))
        env.run(HeldFlow(step), 1, "f")
        assert env.inspect("f")["summary"]["flowStatus"] == "CANCELED"
        assert applied == []
        assert not any(e["type"] == "stepCompleted" for e in env.events)
        assert not env.engine.activity().running and env.engine.release() == 0


class StopBeforeCommit(Faults):
    """At before-commit (the decision judged, not yet committed) the flow is stopped: on the
    loop in the same loop pass, before the group commit flushes; on the handler thread that
    commits it itself (run to completion), committed before that thread's commit begins."""

    engine: Any = None

    def hit(self, point: str, step_type: str, count: int = 1, where: Callable[[], str] | str = "") -> None:
        if point == "before-commit":
            if asyncio._get_running_loop() is not None:
                asyncio.get_running_loop().call_soon(self.engine.change, StopFlow("f"))
            else:
                self.engine.change(StopFlow("f"))  # handed to the loop; returns once committed


@pytest.mark.parametrize("busy", [False, True], ids=["its-thread-commits", "the-loop-commits"])
def test_fenced_while_waiting_for_its_commit_commits_nothing(monkeypatch: pytest.MonkeyPatch, busy: bool) -> None:
    applied = no_completion(monkeypatch)
    faults = StopBeforeCommit()
    with DexTestEnv(faults=faults) as env:
        faults.engine = env.engine
        callback_driven(env)
        other = Blocker(opts(attempts=1), hold=(1,))
        if busy:  # another handler holds a thread: the loop's group commit takes the outcome
            env.start(BlockerFlow(other), 1, "g")
            other.on_call = lambda attempt: env.start(HeldFlow(Held(opts(attempts=1), hold=())), 1, "f")
            env.drive(["g"], until=lambda: (f := env.engine.store.get_flow("f")) is not None and not f.is_running)
        else:
            env.run(HeldFlow(Held(opts(attempts=1), hold=())), 1, "f")
        other.release.set()
        assert env.inspect("f")["summary"]["flowStatus"] == "CANCELED"
        if busy:
            assert applied == []  # its unit was skipped, not applied and fenced
        else:  # its thread's commit was refused by the fence: nothing of it was written
            assert not any(e["type"] == "StepExecuteCompleted" for e in env.inspect("f")["history"])
        assert not any(e["type"] == "stepCompleted" and e["flowId"] == "f" for e in env.events)
        env.drive(["g"])
        assert not env.engine.activity().running and env.engine.release() == 0


def test_a_drive_stopped_with_the_handler_in_its_thread_releases_the_attempt() -> None:
    step = Held(opts(attempts=2), hold=(1,))
    stopping = threading.Event()
    with DexTestEnv() as env:
        seen = callback_driven(env)

        def on_call(attempt: int) -> None:
            if attempt == 1:  # a worker's stop request (or SIGTERM, a closed output) meanwhile
                stopping.set()
                seen["loop"].call_soon_threadsafe(env.engine._wake)

        step.on_call = on_call
        env.start(HeldFlow(step), 10, "f")
        env.drive(["f"], until=stopping.is_set)
        assert not env.engine.activity().running
        assert env.engine.release() == 0  # the drive released it as it ended
        step.release.set()
        assert outcomes(env, "f") == ["INTERRUPTED"]
        assert env.client.wait_for_flow("f").single_output(int) == 12


def test_ctrl_c_with_the_handler_in_its_thread_releases_the_attempt() -> None:
    step = Held(opts(attempts=2), hold=(1,))
    with DexTestEnv() as env:
        seen = callback_driven(env)

        def ctrl_c() -> None:
            raise KeyboardInterrupt

        step.on_call = lambda attempt: seen["loop"].call_soon_threadsafe(ctrl_c) if attempt == 1 else None
        env.start(HeldFlow(step), 10, "f")
        with pytest.raises(KeyboardInterrupt):
            # releases what it was running
            env.engine.drive(["f"], until=lambda: (row := env.engine.store.get_flow("f")) is None or not row.is_running)
        step.release.set()
        [s] = env.inspect("f")["steps"]
        assert s["status"] == "QUEUED" and outcomes(env, "f") == ["INTERRUPTED"]
        assert env.client.wait_for_flow("f").single_output(int) == 12


class Closer(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return force_complete(input)


class Sleeper(Held):
    pass


class Fork(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to_many(StepMovement.of(Sleeper, input), StepMovement.of(Closer, input))


class ForkFlow(Flow[int]):
    def __init__(self, sleeper: Sleeper) -> None:
        self.sleeper = sleeper

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Fork()).other_steps(self.sleeper, Closer())


def test_the_attempt_that_closes_its_flow_ends_as_committed_and_the_others_are_fenced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A decision that closes the flow: the other attempts of the flow running here are fenced
    and cancelled (their late outcome refused); the one that closed it is not cancelled — it
    ends as its commit says."""
    sleeper = Sleeper(opts(attempts=1))
    cancelled: list[tuple[str, str | None]] = []
    real = AttemptRun.cancel

    def spy(run: AttemptRun) -> None:
        cancelled.append((run.seid, run.fenced))
        real(run)

    monkeypatch.setattr(AttemptRun, "cancel", spy)
    with DexTestEnv() as env:
        seen = callback_driven(env)

        def closed(ev: Event) -> None:
            if ev.type == "flowClosed":
                sleeper.release.set()  # its handler returns only after the close

        env.engine.events.listeners.append(closed)
        sleeper.on_call = lambda attempt: None
        env.run(ForkFlow(sleeper), 1, "f")
        assert seen  # callback-driven
        assert env.inspect("f")["summary"]["flowStatus"] == "COMPLETED"
        done = [e["stepType"] for e in env.events if e["type"] == "stepCompleted"]
        assert "Closer" in done and "Sleeper" not in done
        sleeper_seid = next(s["stepExecutionId"] for s in env.inspect("f")["steps"] if s["stepType"] == "Sleeper")
        closer_seid = next(s["stepExecutionId"] for s in env.inspect("f")["steps"] if s["stepType"] == "Closer")
        assert cancelled == [(sleeper_seid, "flow COMPLETED")] and closer_seid != sleeper_seid
        assert not env.engine._runs and env.engine.release() == 0
