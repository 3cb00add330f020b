"""Helpers' returns: data a step computes is not a decision; a helper whose result execute
returns decides (and one whose decision is computed at run time says so)."""
from typing import Any

from dexcli import Context, Flow, Step, StepDecision, StepList, go_to, graceful_complete


def double(n: int) -> int:
    return n * 2


DECISIONS: dict[int, Any] = {}


def route(n: int) -> Any:
    return DECISIONS[n]  # a decision the graph cannot read: execute returns it


class Done(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class Compute(Step[int]):
    def pick(self, n: int) -> str:
        return "big" if n > 10 else "small"  # data, not a decision

    def choose(self, n: int) -> StepDecision:
        return go_to(Decide, n)

    def execute(self, context: Context, n: int) -> StepDecision:
        self.pick(double(n))
        return self.choose(double(n))


class Decide(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        if n > 100:
            return go_to(Done, n)
        return route(n)


class HelperReturnsFlow(Flow[int]):
    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Compute()).other_steps(Decide(), Done())
