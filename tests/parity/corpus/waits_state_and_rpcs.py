"""Accepted: the waiting and state API in one flow — every Wait form, Channel and ChannelMap
conditions, Timers with ids, Attributes and AttributeMaps with an index, locks on execute and
wait_for, loads, and RPCs with and without input, locks and loads."""

from __future__ import annotations

from datetime import timedelta

from dexcli import (
    Attribute,
    AttributeIndex,
    AttributeMap,
    Channel,
    ChannelMap,
    ConditionCombination,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Timer,
    Wait,
    WaitForFailurePolicy,
    graceful_complete,
    rpc,
)

votes = Channel("votes", str)
events = ChannelMap("events", int)
status = Attribute("status", str, index=AttributeIndex(IndexType.KEYWORD, "OrderStatus"))
scores = AttributeMap("scores", int, index=AttributeIndex(IndexType.INT, "Score"))


class Collect(Step[str]):
    def get_step_options(self) -> StepOptions:
        return StepOptions(
            wait_for_method_timeout=timedelta(seconds=30), wait_for_failure=WaitForFailurePolicy.PROCEED,
            wait_for_lock_attributes=(status.lock(),), execute_lock_attributes=(scores.lock("a"),),
            execute_load_attribute_maps=(scores,),
        )

    def wait_for(self, context: Context, input: str) -> Wait:
        if input == "combo":
            return Wait.any_combination_of(
                ConditionCombination.of(votes.for_n(2, condition_id="two")),
                ConditionCombination.of(events.at_least("a", 1, condition_id="a"),
                                        Timer.by_duration(timedelta(minutes=5), condition_id="t")),
            )
        if input == "all":
            return Wait.all_of(votes.at_most(3), events.for_range("b", at_least=1, at_most=2))
        return Wait.any_of(votes.for_one(), Timer.by_duration(timedelta(hours=1), condition_id="expire"))

    def execute(self, context: Context, input: str) -> StepDecision:
        status.set(context, "collected")
        scores.set(context, "a", len(votes.results(context)))
        return graceful_complete(list(votes.results(context)))


class StateFlow(Flow[str]):
    def __init__(self) -> None:
        self.collect = Collect()

    def get_steps(self) -> StepList[str]:
        return StepList.start_step(self.collect)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(votes, events, status, scores)

    @rpc(name="Vote", timeout=timedelta(seconds=5), lock_attributes=(status.lock(),))
    def vote(self, context: Context, who: str) -> RPCResult[int]:
        votes.publish(context, who)
        return RPCResult(votes.size(context) + 1)

    @rpc(load_channels=(votes,), is_transactional=True)
    def drop_first(self, context: Context) -> None:
        pending = votes.pending_messages(context)
        if pending:
            votes.delete(context, pending[0].message_id)

    @rpc
    def read(self, context: Context) -> RPCResult[str]:
        return RPCResult(status.get(context))
