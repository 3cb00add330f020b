"""Valid: a flow that imports the SDK through the official module paths (`from dexcli.step
import ...` becomes `from dex.step import ...`), retries with retry_after imported as Dex's own
docs import it, and streams text through a buffered writer from a sync generator."""

from __future__ import annotations

from collections.abc import Generator
from datetime import timedelta

from dexcli import Flow
from dexcli._grpc_errors import retry_after
from dexcli.context import Context
from dexcli.flow import PersistenceSchema
from dexcli.step import (
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    StepOutput,
    go_to,
    graceful_complete,
)
from dexcli.stream import Stream
from dexcli.timer import Timer
from dexcli.wait import Wait

TEXT = Stream("Text", str, 1 << 16)


class Fetch(Step[str]):
    def execute(self, context: Context, url: str) -> StepDecision:
        if context.attempt < 2:
            raise retry_after(5, RuntimeError("not ready"))
        return go_to(Summarize, url)

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=3))


class Summarize(Step[str]):
    def wait_for(self, context: Context, url: str) -> Wait:
        return Wait.any_of(Timer.by_duration(timedelta(seconds=30)))

    def execute(self, context: Context, url: str) -> Generator[StepOutput, None, StepDecision]:
        writer = TEXT.buffered_text(context, max_buffered_bytes=64)
        for word in ("a", "summary", "of", url):
            yield from writer.write(word + " ")
        yield from writer.flush()
        return graceful_complete(len(url))


class SummaryFlow(Flow[str]):
    def get_steps(self) -> StepList[str]:
        return StepList.start_step(Fetch()).other_steps(Summarize())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(TEXT)
