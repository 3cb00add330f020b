"""Valid: step options (timeouts, retry policy, durability, wait-for failure policy), an
execute-failure route with and without its own options, a renamed step type, container inputs."""

from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Context,
    Flow,
    RetryPolicy,
    Step,
    StepDecision,
    StepDurability,
    StepList,
    StepMovement,
    StepOptions,
    force_fail,
    go_to,
    go_to_many,
    graceful_complete,
)


class Report(Step[list[int]]):
    def get_step_type(self) -> str:
        return "ReportTotals"

    def execute(self, context: Context, totals: list[int]) -> StepDecision:
        return graceful_complete(sum(totals))


class GiveUp(Step[dict[str, int]]):
    def execute(self, context: Context, counts: dict[str, int]) -> StepDecision:
        return force_fail(f"gave up after {counts}")


class Count(Step[dict[str, int]]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            execute_method_timeout=timedelta(minutes=5),
            heartbeat_timeout=timedelta(seconds=30),
            execute_retry=RetryPolicy(
                initial_interval=timedelta(seconds=2),
                backoff_coefficient=3.0,
                maximum_interval=timedelta(seconds=40),
                maximum_attempts=5,
                total_duration=timedelta(minutes=20),
            ),
            execute_durability=StepDurability.SYNC,
        ).on_execute_failure_proceed_to(GiveUp)

    def execute(self, context: Context, counts: dict[str, int]) -> StepDecision:
        return go_to(Report, sorted(counts.values()))


class SplitFailed(Step[tuple[str, ...]]):
    def execute(self, context: Context, words: tuple[str, ...]) -> StepDecision:
        return force_fail(f"could not split {len(words)} words")


class Split(Step[tuple[str, ...]]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(
            SplitFailed, StepOptions(execute_method_timeout=timedelta(minutes=1))
        )

    def execute(self, context: Context, words: tuple[str, ...]) -> StepDecision:
        counts = {w: len(w) for w in words}
        return go_to_many(StepMovement.of(Count, counts), StepMovement.of(Report, [len(words)]))


class WordsFlow(Flow[tuple[str, ...]]):
    def __init__(self) -> None:
        self.split, self.count, self.report = Split(), Count(), Report()
        self.give_up, self.split_failed = GiveUp(), SplitFailed()

    def get_steps(self) -> StepList[tuple[str, ...]]:
        return StepList.start_step(self.split).other_steps(self.count, self.report, self.give_up, self.split_failed)
