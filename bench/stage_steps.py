"""The bench's ThreeStepFlow with each handler's entry and exit stamped (`bench.probes stages`).

The stamps go to `MARKS` as (label, time.perf_counter()) pairs; the steps do what ThreeStepFlow's
do, under the durability given to `StampedSteps`.
"""

from __future__ import annotations

import time

from dexcli import Context, StepDecision, StepDurability, StepOptions, go_to, graceful_complete
from dexcli_flows import three_steps as ts

MARKS: list[tuple[str, float]] = []
_OPTIONS = {"SYNC": StepOptions(), "ASYNC": StepOptions(execute_durability=StepDurability.ASYNC)}
_durability = ["SYNC"]


def _stamp(label: str) -> None:
    MARKS.append((label, time.perf_counter()))


class First(ts.First):
    def get_step_options(self) -> StepOptions:
        return _OPTIONS[_durability[0]]

    def execute(self, context: Context, input: int) -> StepDecision:
        _stamp("First>")
        decision = go_to(Second, input + 1)
        _stamp("First<")
        return decision


class Second(ts.Second):
    def get_step_options(self) -> StepOptions:
        return _OPTIONS[_durability[0]]

    def execute(self, context: Context, input: int) -> StepDecision:
        _stamp("Second>")
        decision = go_to(Third, input * 2)
        _stamp("Second<")
        return decision


class Third(ts.Third):
    def get_step_options(self) -> StepOptions:
        return _OPTIONS[_durability[0]]

    def execute(self, context: Context, input: int) -> StepDecision:
        _stamp("Third>")
        decision = graceful_complete(input + 3)
        _stamp("Third<")
        return decision


class StampedSteps(ts.ThreeStepFlow):
    def __init__(self, durability: str = "SYNC") -> None:
        _durability[0] = durability
        self.first, self.second, self.third = First(), Second(), Third()
