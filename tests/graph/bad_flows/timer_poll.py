"""Rule timer-self-loop through wait_for shapes: Timers only (any_of of two, through a helper
and a local) then a goTo to itself is a poll; a Timer beside a channel is a reminder, not a poll.
Runs: each step counts its input down, then hands over to the next."""
from datetime import timedelta

from dexcli import (
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    go_to,
    graceful_complete,
)

FAST = timedelta(seconds=30)
replies = Channel("replies", str)


class PollTwice(Step[int]):
    def wait_for(self, context: Context, n: int) -> Wait:
        return Wait.any_of(Timer.by_duration(FAST, condition_id="fast"), Timer.by_duration(FAST * 4))

    def execute(self, context: Context, n: int) -> StepDecision:
        if n <= 0:
            return go_to(RemindOrReply, 2)
        return go_to(PollTwice, n - 1)  # FINDING timer-self-loop


class RemindOrReply(Step[int]):
    def wait_for(self, context: Context, n: int) -> Wait:
        return Wait.any_of(replies.for_one(condition_id="reply"), Timer.by_duration(timedelta(hours=1)))

    def execute(self, context: Context, n: int) -> StepDecision:
        if n <= 0:
            return go_to(PollViaHelper, 1)
        return go_to(RemindOrReply, n - 1)  # a reminder loop: no finding


class PollViaHelper(Step[int]):
    def wait_for(self, context: Context, n: int) -> Wait:
        return self._wait()

    def _wait(self) -> Wait:
        wait = Wait.until(Timer.by_duration(timedelta(minutes=5), condition_id="tick"))
        return wait

    def execute(self, context: Context, n: int) -> StepDecision:
        if n <= 0:
            return graceful_complete("done")
        return go_to(PollViaHelper, n - 1)  # FINDING timer-self-loop


class TimerPollFlow(Flow[int]):
    def __init__(self) -> None:
        self.poll, self.remind, self.helper = PollTwice(), RemindOrReply(), PollViaHelper()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.poll).other_steps(self.remind, self.helper)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(replies)
