"""Valid: a sync generator step annotated Generator[StepOutput, None, StepDecision] that heartbeats
and writes a Stream message, with a dataclass input and an Enum field."""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass

from dexcli import (
    Context,
    Flow,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    StepOutput,
    Stream,
    graceful_complete,
    heartbeat,
)


class Phase(enum.Enum):
    COPYING = "copying"
    DONE = "done"


@dataclass(frozen=True)
class CopyJob:
    source: str
    files: int
    phase: Phase


PROGRESS = Stream("CopyProgress", int, 1 << 16)


class Copy(Step[CopyJob]):
    def execute(self, context: Context, job: CopyJob) -> Generator[StepOutput, None, StepDecision]:
        for i in range(job.files):
            yield heartbeat(i)
            yield PROGRESS.write(context, i)
        return graceful_complete(job.files)


class CopyFlow(Flow[CopyJob]):
    def __init__(self) -> None:
        self.copy = Copy()

    def get_steps(self) -> StepList[CopyJob]:
        return StepList.start_step(self.copy)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(PROGRESS)
