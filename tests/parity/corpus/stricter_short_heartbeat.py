"""dexcli is stricter: a heartbeat timeout under 10 s (official: the server refuses it when the
step is scheduled; dex refuses it at registration)."""

from __future__ import annotations

from datetime import timedelta

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, graceful_complete


class Quick(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=5))

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class QuickFlow(Flow[int]):
    def __init__(self) -> None:
        self.quick = Quick()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.quick)
