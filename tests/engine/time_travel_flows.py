"""A flow for time travel: Prepare (an attribute write; with input 99 it publishes the decision
itself) -> Review (waits for a decision published
by the `decide` RPC, which also writes an attribute, or a one-hour timer) -> Ship; the `remind`
RPC starts a Note step beside them. Each step
counts its runs in RUNS, so a test sees what a new run ran again."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from dexcli import (
    Attribute,
    AttributeIndex,
    Channel,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepMovement,
    Timer,
    Wait,
    dead_end,
    go_to,
    graceful_complete,
    rpc,
)

RUNS: Counter[str] = Counter()  # "<step>.<method>" -> calls

decisions = Channel("decisions", str)
stage = Attribute("stage", str, index=AttributeIndex(IndexType.KEYWORD, "Stage"))
decided_by = Attribute("decided_by", str)


class Prepare(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        RUNS["Prepare.execute"] += 1
        stage.set(context, "prepared")
        if input == 99:  # decides itself: its publish waits for Review
            decisions.publish(context, "auto")
        return go_to(Review, input + 1)


class Review(Step[int]):
    def wait_for(self, context: Context, input: int) -> Wait:
        RUNS["Review.wait_for"] += 1
        return Wait.any_of(decisions.for_one(condition_id="decision"),
                           Timer.by_duration(timedelta(hours=1), condition_id="expire"))

    def execute(self, context: Context, input: int) -> StepDecision:
        RUNS["Review.execute"] += 1
        verdict = "expired" if context.has_timer_fired() else decisions.results(context)[0]
        return go_to(Ship, {"n": input, "verdict": verdict, "by": decided_by.get(context)})


class Ship(Step[dict[str, object]]):
    def execute(self, context: Context, input: dict[str, object]) -> StepDecision:
        RUNS["Ship.execute"] += 1
        stage.set(context, "shipped")
        return graceful_complete(input)


class Note(Step[str]):
    """Started by the `remind` RPC beside Review."""

    def execute(self, context: Context, input: str) -> StepDecision:
        RUNS["Note.execute"] += 1
        return dead_end()


class OrderFlow(Flow[int]):
    def __init__(self) -> None:
        self.prepare, self.review, self.ship, self.note = Prepare(), Review(), Ship(), Note()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.prepare).other_steps(self.review, self.ship, self.note)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(decisions, stage, decided_by)

    @rpc
    def decide(self, context: Context, verdict: str) -> RPCResult[str]:
        decisions.publish(context, verdict)
        decided_by.set(context, "rpc")
        return RPCResult(verdict)

    @rpc
    def remind(self, context: Context, text: str) -> RPCResult[str]:
        return RPCResult(text, next_steps=(StepMovement.of(Note, text),))


class Old(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        raise RuntimeError("the bug")


class New(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input * 10)


class Before(Flow[int]):
    """Flow type Renamed as it was: its start step Old raises."""

    def get_flow_type(self) -> str:
        return "Renamed"

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(Old())


class After(Before):
    """Flow type Renamed after the fix: its start step is New."""

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(New())
