"""FanOutFlow: a parent that fans work out to SubFlows and waits for all of them.

`Split(n)` waits on n SubFlows of SquareFlow (`SubFlow.run`, in one `Wait.all_of`); each child
is a flow of its own (`SubFlow:<parent>-Split-1-<i>`) that waits i*5 seconds on a durable timer
and returns i*i. Once every child has ended, however it ended, `Split.execute` reads each
result (`SubFlow.get_condition_results`) and completes with the sum of the squares it got and
each child's status: stop a child (`dex stop ID`) and the parent goes on without its square.
"""

from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Context,
    Flow,
    FlowStatus,
    Step,
    StepDecision,
    StepList,
    SubFlow,
    Timer,
    Wait,
    graceful_complete,
)


class Square(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=5 * input)))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input * input)


class SquareFlow(Flow[int]):
    """The child: i -> i*i after i*5 seconds."""

    def __init__(self) -> None:
        self.square = Square()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.square)


class Split(Step[int]):
    def __init__(self, child: SquareFlow) -> None:
        self.child = child

    def wait_for(self, context: Context, input: int) -> Wait:
        if input < 1:
            raise ValueError("fan-out needs at least one child: --input N with N >= 1")
        return Wait.all_of(*(SubFlow.run(self.child, i) for i in range(1, input + 1)))

    def execute(self, context: Context, input: int) -> StepDecision:
        total, children = 0, {}
        for i in range(input):
            result = SubFlow.get_condition_results(context, i)
            children[SubFlow.get_flow_id(context, i)] = result.status.name
            if result.status is FlowStatus.COMPLETED:
                total += result.single_output(int)
        return graceful_complete({"sumOfSquares": total, "children": children})


class FanOutFlow(Flow[int]):
    """The parent: n -> n SubFlows, then the sum of their squares."""

    def __init__(self) -> None:
        self.split = Split(SquareFlow())

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.split)
