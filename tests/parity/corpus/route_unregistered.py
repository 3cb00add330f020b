"""An execute-failure route to a step the flow does not register: both Registries take it; mapping
the step's options fails, so both refuse when the step is scheduled (dex warns at registration)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, force_fail, graceful_complete


class Recover(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return force_fail(f"failed at {n}")


class Work(Step[int]):
    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(Recover)

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class UnroutedFlow(Flow[int]):
    def __init__(self) -> None:
        self.work = Work()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.work)
