"""A flow without a start step: both Registries take it (its steps are reached through RPCs; it
starts idle, as on a Dex server)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete


class Later(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class NoStartFlow(Flow[None]):
    def __init__(self) -> None:
        self.later = Later()

    def get_steps(self) -> StepList[None]:
        return StepList.without_start_step(self.later)
