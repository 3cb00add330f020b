"""An execute-failure route given a step instance instead of its class: both Registries take it;
mapping the step's options fails, so both refuse when the step is scheduled (dex warns)."""

from __future__ import annotations

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, force_fail, graceful_complete


class Recover(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        return force_fail(f"failed at {n}")


class Work(Step[int]):
    def __init__(self, recover: Recover) -> None:
        self.recover = recover

    def get_step_options(self) -> StepOptions:
        return StepOptions().on_execute_failure_proceed_to(self.recover)  # type: ignore[arg-type]

    def execute(self, context: Context, n: int) -> StepDecision:
        return graceful_complete(n)


class InstanceRouteFlow(Flow[int]):
    def __init__(self) -> None:
        self.recover = Recover()
        self.work = Work(self.recover)

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.work).other_steps(self.recover)
