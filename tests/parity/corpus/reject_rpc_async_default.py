"""Rejected: an async RPC under the default Registry (allow_async_handlers=False)."""

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
    async def count(self, context: Context) -> RPCResult[int]:
        return RPCResult(1)
