"""Step-execution locals carry a value from wait_for to execute (committed with the wait);
record_event puts staged events into the completed event's history."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, Wait, graceful_complete
from dexcli.testing import DexTestEnv


class Carry(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        context.set_step_execution_local("doubled", input * 2)
        return Wait.skip_immediately()

    def execute(self, context: Context, input: int) -> StepDecision:
        context.record_event("seen", {"local": context.get_step_execution_local("doubled", int)})
        return graceful_complete(context.get_step_execution_local("doubled", int))


class CarryFlow(Flow[int]):
    def __init__(self) -> None:
        self.carry = Carry()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.carry)


def test_a_local_set_in_wait_for_is_read_in_execute_and_events_are_recorded() -> None:
    with DexTestEnv(start=0.0) as env:
        assert env.run(CarryFlow(), 21, "c").single_output() == 42
        completed = next(e for e in env.inspect("c")["history"] if e["type"] == "StepExecuteCompleted")
        assert completed["recordEvents"] == [{"name": "seen", "value": {"local": 42}}]
        [step] = env.store.steps_of("c")
        assert step.locals is not None and '"doubled"' in step.locals
