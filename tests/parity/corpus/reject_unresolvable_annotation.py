"""Rejected: an input annotation that names a type only imported for type checkers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dexcli import Context, Flow, Step, StepDecision, StepList, graceful_complete

if TYPE_CHECKING:
    from decimal import Decimal


class Bad(Step["Decimal"]):
    def execute(self, context: Context, amount: Decimal) -> StepDecision:
        return graceful_complete(str(amount))


class BadFlow(Flow[int]):
    def __init__(self) -> None:
        self.bad = Bad()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.bad)
