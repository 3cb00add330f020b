"""A payment that is polled, then recorded under a lock: the seed's Locks rule, running.

"Do not hold ExecuteLockAttributes for the whole wait; put what must be committed under a
lock into a short step after the polling step." AwaitPayment polls a simulated provider (no
lock, a heartbeat with a checkpoint each round); once the payment settles, RecordSettlement —
a short step that holds the lock on `settled_total` — adds it. The `settled` RPC reads the
total (it is how a consumer recovers state when best-effort Stream messages are gone).

    dex run payment --input '{"payment_id": "p-1", "amount": 250}'
    dex rpc FLOW_ID settled
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from dexcli import (
    AsyncContext,
    Attribute,
    AttributeIndex,
    Context,
    Flow,
    IndexType,
    PersistenceSchema,
    RPCResult,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    go_to,
    graceful_complete,
    rpc,
)


@dataclass
class Payment:
    payment_id: str
    amount: int
    polls_to_settle: int = 3  # the simulated provider settles on this poll
    poll_seconds: int = 2


@dataclass
class Settled:
    payment_id: str
    amount: int


settled_total = Attribute("settled_total", int)
payment_state = Attribute("payment_state", str, index=AttributeIndex(IndexType.KEYWORD, "PaymentState"))


def provider_state(payment: Payment, poll: int) -> str:
    """The simulated provider: PENDING until the payment's settling poll."""
    return "SETTLED" if poll >= payment.polls_to_settle else "PENDING"


class AwaitPayment(Step[Payment]):
    """Polls without holding any lock: a heartbeat (with the poll count) every round."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(heartbeat_timeout=timedelta(seconds=30), execute_method_timeout=timedelta(minutes=10))

    async def execute(self, context: AsyncContext, input: Payment) -> StepDecision:
        polls = context.get_last_heartbeat_value(int) or 0
        while True:
            polls += 1
            state = provider_state(input, polls)
            await context.heartbeat(polls)
            if state == "SETTLED":
                return go_to(RecordSettlement, Settled(input.payment_id, input.amount))
            await asyncio.sleep(input.poll_seconds)


class RecordSettlement(Step[Settled]):
    """Short and locked: a read-modify-write of the total that loses no concurrent update."""

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(settled_total.lock(),))

    def execute(self, context: Context, input: Settled) -> StepDecision:
        total = settled_total.get(context) + input.amount
        settled_total.set(context, total)
        payment_state.set(context, "settled")
        return graceful_complete(total)


class PaymentFlow(Flow[Payment]):
    def __init__(self) -> None:
        self.await_payment, self.record = AwaitPayment(), RecordSettlement()

    def get_steps(self) -> StepList[Payment]:
        return StepList.start_step(self.await_payment).other_steps(self.record)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(settled_total, payment_state)

    @rpc
    def settled(self, context: Context) -> RPCResult[int]:
        """The settled total so far (read-only: served from a closed run too)."""
        return RPCResult(settled_total.get(context))
