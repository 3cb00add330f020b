"""Flows that wait: timers, channels (published by steps), any_of / all_of / combinations."""

from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Channel,
    ChannelMap,
    ConditionCombination,
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Timer,
    Wait,
    dead_end,
    go_to,
    go_to_many,
    graceful_complete,
)

replies = Channel("replies", str)
orders = ChannelMap("orders", int)


class Remind(Step[int]):
    """Waits `input` seconds on a timer, then completes with whether it fired."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.until(Timer.by_duration(timedelta(seconds=input), condition_id="remind"))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete({"fired": context.has_timer_fired(), "first": context.has_timer_fired(0)})


class TimerFlow(Flow[int]):
    def __init__(self) -> None:
        self.remind = Remind()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.remind)


class Publish(Step[list[str]]):
    def execute(self, context: Context, input: list[str]) -> StepDecision:
        for v in input:
            replies.publish(context, v)
        return dead_end()


class WaitReply(Step[int]):
    """any_of(a reply, a timer of `input` seconds): the timer wins when both are ready."""

    def wait_for(self, context: Context, input: int) -> Wait:
        return Wait.any_of(replies.for_one(condition_id="reply"),
                           Timer.by_duration(timedelta(seconds=input), condition_id="expire"))

    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete({"replies": list(replies.results(context)), "expired": context.has_timer_fired()})


class Start(Step[dict[str, object]]):
    """Publishes `before` replies, then starts WaitReply (and publishes nothing after)."""

    def execute(self, context: Context, input: dict[str, object]) -> StepDecision:
        for v in input.get("before", []):  # type: ignore[attr-defined]
            replies.publish(context, v)
        return go_to(WaitReply, int(input["timeout"]))  # type: ignore[call-overload]


class ReplyFlow(Flow[dict[str, object]]):
    def __init__(self) -> None:
        self.start, self.wait, self.publish = Start(), WaitReply(), Publish()

    def get_steps(self) -> StepList[dict[str, object]]:
        return StepList.start_step(self.start).other_steps(self.wait, self.publish)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(replies)


class Collect(Step[str]):
    """Waits with the condition named by its input; completes with what it consumed."""

    def wait_for(self, context: Context, input: str) -> Wait:
        conditions = {
            "for_n": Wait.until(replies.for_n(2)),
            "at_least": Wait.until(replies.at_least(2)),
            "at_most": Wait.until(replies.at_most(2)),
            "range": Wait.until(replies.for_range(at_least=1, at_most=2)),
            "combo": Wait.any_combination_of(
                ConditionCombination.of(replies.for_n(3, condition_id="three")),
                ConditionCombination.of(replies.for_one(condition_id="one"),
                                        Timer.by_duration(timedelta(seconds=5), condition_id="t")),
            ),
        }
        return conditions[input]

    def execute(self, context: Context, input: str) -> StepDecision:
        return graceful_complete(list(replies.results(context)))


class Feed(Step[list[str]]):
    """Starts Collect with the condition name, then publishes the values one step later."""

    def execute(self, context: Context, input: list[str]) -> StepDecision:
        return go_to_many(StepMovement.of(Collect, input[0]), StepMovement.of(Publish, input[1:]))


class ChannelFlow(Flow[list[str]]):
    def __init__(self) -> None:
        self.feed, self.collect, self.publish = Feed(), Collect(), Publish()

    def get_steps(self) -> StepList[list[str]]:
        return StepList.start_step(self.feed).other_steps(self.collect, self.publish)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(replies)
