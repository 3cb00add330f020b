"""An approval that waits for a person or expires: the WaitFor example.

The step waits for whichever comes first: a decision published by the `approve` or `reject`
RPC, or a timer (24 h by default). It holds no worker while it waits and survives restarts.
Drive it from a second terminal:

    dex run approval --input '{"title": "Laptop", "amount": 1200}'
    dex rpc FLOW_ID approve --input '"dana"'         # or: reject
    dex skip-timer FLOW_ID AwaitDecision-1 --condition-id expire
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dexcli import (
    Channel,
    Context,
    Flow,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    Timer,
    Wait,
    graceful_complete,
    rpc,
)


@dataclass
class Request:
    title: str
    amount: int = 0
    expire_after_hours: int = 24
    expire_after_seconds: int | None = None  # a short expiry for demos and tests (overrides the hours)


@dataclass
class Verdict:
    approved: bool
    by: str


@dataclass
class Outcome:
    status: str  # approved | rejected | expired
    title: str
    by: str = ""


decisions = Channel("decisions", Verdict)


class AwaitDecision(Step[Request]):
    def wait_for(self, context: Context, input: Request) -> Wait:
        expiry = (timedelta(seconds=input.expire_after_seconds) if input.expire_after_seconds is not None
                  else timedelta(hours=input.expire_after_hours))
        return Wait.any_of(
            decisions.for_one(condition_id="decision"),
            Timer.by_duration(expiry, condition_id="expire"),
        )

    def execute(self, context: Context, input: Request) -> StepDecision:
        if context.has_timer_fired():
            return graceful_complete(Outcome("expired", input.title))
        verdict = decisions.results(context)[0]
        return graceful_complete(Outcome("approved" if verdict.approved else "rejected", input.title, verdict.by))


class ApprovalFlow(Flow[Request]):
    def __init__(self) -> None:
        self.await_decision = AwaitDecision()

    def get_steps(self) -> StepList[Request]:
        return StepList.start_step(self.await_decision)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(decisions)

    @rpc
    def approve(self, context: Context, by: str) -> RPCResult[str]:
        decisions.publish(context, Verdict(True, by))
        return RPCResult(f"approved by {by}")

    @rpc
    def reject(self, context: Context, by: str) -> RPCResult[str]:
        decisions.publish(context, Verdict(False, by))
        return RPCResult(f"rejected by {by}")

    @rpc
    def pending(self, context: Context) -> RPCResult[int]:
        """How many decisions are queued and not yet taken (read-only)."""
        return RPCResult(decisions.size(context))
