"""Rule timer-self-loop: wait on a Timer, then go to itself to poll again."""
from datetime import timedelta

from dexcli import Context, Flow, Step, StepDecision, StepList, Timer, Wait, go_to, graceful_complete

DONE: set[str] = set()


class PollJob(Step[str]):
    def wait_for(self, context: Context, job_id: str) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=30)))

    def execute(self, context: Context, job_id: str) -> StepDecision:
        if job_id in DONE:
            return graceful_complete(job_id)
        return go_to(PollJob, job_id)  # FINDING timer-self-loop


class StartJob(Step[None]):
    def execute(self, context: Context, input: None) -> StepDecision:
        return go_to(PollJob, "job-1")


class TimerSelfLoopFlow(Flow[None]):
    def __init__(self) -> None:
        self.start, self.poll = StartJob(), PollJob()

    def get_steps(self) -> StepList[None]:
        return StepList.start_step(self.start).other_steps(self.poll)
