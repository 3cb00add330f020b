"""A flow that runs under dex but would not carry over to a Dex server as it is: each line marked
`# PORTABLE <rule>` is a `dex lint --portable` finding of that rule (tests/graph/test_portability.py)."""

from __future__ import annotations

import dexcli
from dexcli import AsyncContext, Context, Flow, Registry, Step, StepDecision, StepList, Worker, go_to, graceful_complete
from dexcli.sdk.errors import FlowCodeError  # PORTABLE dex-only-module

VERSION = dexcli.__version__  # PORTABLE dex-only-name


class First(Step[int]):
    def execute(self, context: Context, n: int) -> StepDecision:
        if n < 0:
            raise FlowCodeError("negative")
        return go_to(Second, n)


class Second(Step[int]):
    async def execute(self, context: AsyncContext, n: int) -> StepDecision:  # PORTABLE async-handler
        return graceful_complete(n)


class NotPortableFlow(Flow[int]):
    def __init__(self) -> None:
        self.first, self.second = First(), Second()

    def get_steps(self) -> StepList[int]:
        steps = StepList.start_step(self.first).other_steps(self.second)
        assert len(steps.all_steps()) == 2  # PORTABLE dex-only-name
        return steps


def serve(path: str) -> None:
    registry = Registry([NotPortableFlow()], checks=None)  # PORTABLE dex-only-parameter
    with Worker(registry, db=path) as worker:  # PORTABLE dex-only-parameter
        worker.run(until_idle=True)  # PORTABLE dex-only-parameter
    client = dexcli.Client(registry, db=path)  # PORTABLE dex-only-parameter
    client.start_flow(NotPortableFlow(), None, 1)  # PORTABLE dex-only-parameter


def official_module_paths() -> tuple[type, type]:
    from dexcli.client import AsyncClient  # PORTABLE dex-only-name
    from dexcli.wait import Wait  # the official SDK's own module path: moves with the swap
    return AsyncClient, Wait
