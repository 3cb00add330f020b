"""What dex does not run yet fails loudly and at once (INVALID_USER_FLOW_CODE, or the start
refused), never silently as something else."""

from __future__ import annotations

import pytest

from dexcli import Context, Flow, FlowErrorType, Step, StepDecision, StepList, StepOptions, go_to, graceful_complete
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.sdk.options import StepDurability
from dexcli.testing import DexTestEnv


class Sibling(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class Cancels(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return go_to(Sibling, input).with_canceling_sibling_steps(Sibling)


class CancelFlow(Flow[int]):
    def __init__(self) -> None:
        self.cancels, self.sibling = Cancels(), Sibling()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.cancels).other_steps(self.sibling)


def test_a_decision_that_cancels_other_steps_fails_the_flow_at_once() -> None:
    with DexTestEnv() as env:
        result = env.run(CancelFlow(), 1, "f")
        assert result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE
        message = result.error_message or ""
        assert "dex does not cancel other step executions yet" in message
        [step] = env.inspect("f")["steps"]
        assert len(step["attempts"]) == 1  # not retried: retrying cannot help


class Durable(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_durability=StepDurability.ASYNC)

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class AsyncDurabilityFlow(Flow[int]):
    def __init__(self) -> None:
        self.durable = Durable()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.durable)


def test_async_durability_is_refused_at_start_not_run_as_sync() -> None:
    with DexTestEnv() as env:
        with pytest.raises(NotSupportedYetError, match="ASYNC durability"):
            env.start(AsyncDurabilityFlow(), 1, "f")
        assert env.store.get_flow("f") is None
