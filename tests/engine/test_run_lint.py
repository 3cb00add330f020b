"""The timer-self-loop anti-pattern found in a real run (dexcli.graph.run_lint over the step
executions and persisted Waits a flow left in the database), in virtual time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dexcli import (
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    go_to,
    graceful_complete,
)
from dexcli.graph.run_lint import lint_run, timer_self_loops
from dexcli.testing import DexTestEnv

pings = Channel("pings", int)


class PollJob(Step[int]):
    """Waits 30 s on a timer, then goes to itself until `input` polls are done."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=30), condition_id="poll"))

    def execute(self, context: Context, input: int) -> StepDecision:
        if input <= 0:
            return graceful_complete("done")
        return go_to(PollJob, input - 1)


class PollFlow(Flow[int]):
    def __init__(self) -> None:
        self.poll = PollJob()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.poll)


class Remind(Step[int]):
    """Waits for a ping or a 30 s reminder timer, and goes to itself after a reminder: not a poll."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.any_of(pings.for_one(condition_id="ping"),
                           Timer.by_duration(timedelta(seconds=30), condition_id="remind"))

    def execute(self, context: Context, input: int) -> StepDecision:
        if input <= 0:
            return graceful_complete("done")
        return go_to(Remind, input - 1)


class RemindFlow(Flow[int]):
    def __init__(self) -> None:
        self.remind = Remind()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.remind)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(pings)


def test_a_run_that_polled_by_timer_five_times_is_reported_with_the_count_and_where() -> None:
    with DexTestEnv(start=0.0) as env:
        assert env.run(PollFlow(), 5, "p").single_output() == "done"
        steps = env.store.steps_of("p")
        assert [s.step_execution_id for s in steps] == [f"PollJob-{i}" for i in range(1, 7)]
        [loop] = timer_self_loops(steps)
        assert loop.step_type == "PollJob" and loop.moves == 5 and loop.interval == 30.0
        report = lint_run("p", "PollFlow", steps, PollFlow())
    [finding] = report.findings
    assert finding.rule == "timer-self-loop" and finding.step == "PollJob" and finding.run == "p"
    assert finding.message.startswith("PollJob waited only on a Timer and then moved to a new execution of "
                                      "itself 5 times in a row (PollJob-1 … PollJob-6, each after 30 s).")
    assert finding.file == __file__ and finding.line is not None
    assert "go_to(PollJob" in Path(__file__).read_text().splitlines()[finding.line - 1]
    assert report.exit_code() == 1 and report.exit_code(exit_zero=True) == 0


def test_two_moves_are_not_yet_a_polling_loop_and_a_run_without_the_definition_says_the_flow() -> None:
    with DexTestEnv(start=0.0) as env:
        env.run(PollFlow(), 2, "short")
        env.run(PollFlow(), 3, "three")
        assert lint_run("short", "PollFlow", env.store.steps_of("short")).findings == []
        [finding] = lint_run("three", "PollFlow", env.store.steps_of("three")).findings
    assert finding.file is None and finding.location() == "flow three" and "3 times in a row" in finding.message


def test_a_step_that_also_waits_on_a_channel_is_not_polling() -> None:
    with DexTestEnv(start=0.0) as env:
        env.run(RemindFlow(), 4, "r")
        steps = env.store.steps_of("r")
        assert len(steps) == 5 and all(s.wait for s in steps)
        assert timer_self_loops(steps) == []
