"""Stream: best-effort progress messages, shared capacity per flow type and stream name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from dexcli.sdk.context import StepOutput

T = TypeVar("T")

MAX_MESSAGE_BYTES = 100 * 1024
MESSAGE_OVERHEAD_BYTES = 64  # what a message costs beyond its value, flow id and source


def message_size(value_json: str, flow_id: str, source: str) -> int:
    """The bytes a message counts against MAX_MESSAGE_BYTES and its stream's capacity."""
    return len(value_json.encode()) + len(flow_id) + len(source) + MESSAGE_OVERHEAD_BYTES


@dataclass(frozen=True)
class Stream(Generic[T]):
    name: str
    value_type: Any
    stream_capacity_bytes: int

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"stream name {self.name!r} must be non-empty and contain no '/'")
        if not isinstance(self.stream_capacity_bytes, int) or self.stream_capacity_bytes <= 0:
            raise ValueError(f"stream {self.name}: stream_capacity_bytes must be a positive int")

    def write(self, context: Any, value: T) -> StepOutput | None:
        """Write one message. Async steps: a plain call (do not await). Sync generator steps:
        `yield stream.write(context, value)`. A write is an implicit heartbeat."""
        writer = getattr(context, "_dex_stream_write", None)
        if writer is None:
            raise TypeError("Stream.write needs the Context the step was given")
        frame: StepOutput | None = writer(self, value)
        return frame


@dataclass(frozen=True)
class StreamMessage(Generic[T]):
    value: T
    resume_token: str
    created_time: datetime
    source: str


@dataclass(frozen=True)
class StreamMessagesPage(Generic[T]):
    messages: tuple[StreamMessage[T], ...]
    next_page_token: str
