"""What a handler is given (Context / AsyncContext) and the frames a sync generator yields.

These are interfaces: the engine implements them. Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from dexcli.sdk.omitted import OMITTED

T = TypeVar("T")


@dataclass(frozen=True)
class RecoveryErrorInfo:
    """Why the step that routed here failed: the detail and the error type.

    error_type is `module.QualName` of the exception (e.g. `builtins.LookupError`) or one of
    the timeout kinds `StartToClose`, `Heartbeat`, `ScheduleToClose`.
    """

    detail: str
    error_type: str



@dataclass(frozen=True)
class StepOutput:
    """A frame a sync generator handler yields: a heartbeat or a Stream message."""

    kind: str  # "heartbeat" | "stream"
    value: Any = OMITTED
    stream: Any = None


def heartbeat(value: Any = OMITTED) -> StepOutput:
    """For sync generator handlers: `yield heartbeat(value)`. No value clears the checkpoint."""
    return StepOutput("heartbeat", value)


@runtime_checkable
class Context(Protocol):
    flow_id: str
    run_id: str
    step_execution_id: str
    from_step_execution_id: str
    attempt: int
    first_attempt_at: datetime

    @property
    def recovery_error(self) -> RecoveryErrorInfo | None: ...

    def has_last_heartbeat_value(self) -> bool: ...

    def get_last_heartbeat_value(self, value_type: type[T]) -> T | None: ...

    def is_cancellation_requested(self) -> bool: ...

    def wait_for_method_failed(self) -> bool: ...

    def has_timer_fired(self, index: int | None = None) -> bool: ...


@runtime_checkable
class AsyncContext(Context, Protocol):
    async def heartbeat(self, value: Any = OMITTED) -> None: ...
