"""Validation: heartbeat_timeout under the 10 s minimum."""
from datetime import timedelta

from dexcli import Context, Flow, Step, StepDecision, StepList, StepOptions, graceful_complete


class Work(Step[str]):  # ERROR invalid-definition
    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=5))

    def execute(self, context: Context, job_id: str) -> StepDecision:
        return graceful_complete(job_id)


class ShortHeartbeatFlow(Flow[str]):
    def __init__(self) -> None:
        self.work = Work()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.work)
