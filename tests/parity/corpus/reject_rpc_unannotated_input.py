"""Rejected: an RPC whose input is not annotated."""

from __future__ import annotations

from dexcli import Context, Flow, RPCResult, Step, StepDecision, StepList, graceful_complete, rpc


class One(Step[int]):
    def execute(self, context: Context, input: int) -> StepDecision:
        return graceful_complete(input)


class RpcFlow(Flow[int]):
    def __init__(self) -> None:
        self.one = One()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.one)

    @rpc
    def count(self, context: Context, n) -> RPCResult[int]:  # type: ignore[no-untyped-def]
        return RPCResult(n)
