"""What dex does not run yet fails loudly and at once (INVALID_USER_FLOW_CODE, or the start
refused), never silently as something else."""

from __future__ import annotations

import pytest

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, graceful_complete
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.sdk.options import StepDurability
from dexcli.testing import DexTestEnv


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
