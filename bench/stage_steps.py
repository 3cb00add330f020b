"""The bench's ThreeStepFlow with each handler's entry and exit stamped (`bench.probes stages`).

The stamps go to `MARKS` as (label, time.perf_counter()) pairs; the steps do what ThreeStepFlow's
do, under the durability given to `StampedSteps`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from dexcli import Context, StepDecision, StepDurability, StepOptions, go_to, graceful_complete
from dexcli_flows import three_steps as ts

MARKS: list[tuple[str, float]] = []
_OPTIONS = {"SYNC": StepOptions(), "ASYNC": StepOptions(execute_durability=StepDurability.ASYNC)}
_durability = ["SYNC"]


class _Stamped:
    """Each step's options (the flow's durability), and its decision made between two stamps."""

    def get_step_options(self) -> StepOptions:
        return _OPTIONS[_durability[0]]

    def _stamped(self, decide: Callable[[], StepDecision]) -> StepDecision:
        name = type(self).__name__
        MARKS.append((f"{name}>", time.perf_counter()))
        decision = decide()
        MARKS.append((f"{name}<", time.perf_counter()))
        return decision


class First(_Stamped, ts.First):
    def execute(self, context: Context, input: int) -> StepDecision:
        return self._stamped(lambda: go_to(Second, input + 1))


class Second(_Stamped, ts.Second):
    def execute(self, context: Context, input: int) -> StepDecision:
        return self._stamped(lambda: go_to(Third, input * 2))


class Third(_Stamped, ts.Third):
    def execute(self, context: Context, input: int) -> StepDecision:
        return self._stamped(lambda: graceful_complete(input + 3))


class StampedSteps(ts.ThreeStepFlow):
    def __init__(self, durability: str = "SYNC") -> None:
        _durability[0] = durability
        self.first, self.second, self.third = First(), Second(), Third()
