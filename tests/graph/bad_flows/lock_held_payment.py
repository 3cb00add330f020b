"""The payment example with the lock on the polling step: what the seed's Locks rule forbids."""

from __future__ import annotations

from dexcli import StepOptions
from dexcli_flows.payment import AwaitPayment, PaymentFlow, settled_total


class LockedAwaitPayment(AwaitPayment):
    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_lock_attributes=(settled_total.lock(),))

    def get_step_type(self) -> str:
        return "AwaitPayment"


class LockedPaymentFlow(PaymentFlow):
    def __init__(self) -> None:
        super().__init__()
        self.await_payment = LockedAwaitPayment()
