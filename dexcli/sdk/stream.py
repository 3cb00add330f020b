"""Stream: best-effort progress messages, shared capacity per flow type and stream name; and
the buffered text writers that batch many small chunks (a model's tokens) into fewer messages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, overload

from dexcli.sdk.context import AsyncContext, Context, StepOutput

T = TypeVar("T")

DEFAULT_FLUSH_INTERVAL = timedelta(seconds=1)
DEFAULT_MAX_BUFFERED_BYTES = 16 * 1024

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

    @overload
    def buffered_text(self: Stream[str], context: AsyncContext, *,  # type: ignore[overload-overlap]
                      flush_interval: timedelta = DEFAULT_FLUSH_INTERVAL,
                      max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES) -> AsyncBufferedTextStream: ...

    @overload
    def buffered_text(self: Stream[str], context: Context, *, flush_interval: timedelta = DEFAULT_FLUSH_INTERVAL,
                      max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES) -> BufferedTextStream: ...

    def buffered_text(self: Stream[str], context: Context, *, flush_interval: timedelta = DEFAULT_FLUSH_INTERVAL,
                      max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES
                      ) -> AsyncBufferedTextStream | BufferedTextStream:
        """A writer of text chunks that writes them to this Stream[str] as fewer, larger messages.

        A batch becomes one message when it reaches `max_buffered_bytes` (UTF-8; a soft limit,
        chunks are never split) or `flush_interval` after its first chunk. An async step's
        writer flushes on a timer, and what is left when the handler returns or raises is
        written before its result commits. A sync generator's writer looks at the interval only
        when a chunk arrives: the step yields what `write` and a final `flush()` return
        (`yield from writer.flush()`)."""
        if self.value_type is not str:
            raise TypeError(f"stream {self.name}: buffered_text needs a Stream[str]")
        _check_buffer_options(flush_interval, max_buffered_bytes)
        opener = getattr(context, "_dex_buffered_text", None)
        if opener is None:
            raise ValueError("Stream.buffered_text needs the Context the step was given")
        writer: AsyncBufferedTextStream | BufferedTextStream = opener(self, flush_interval, max_buffered_bytes)
        return writer


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


def _check_buffer_options(flush_interval: Any, max_buffered_bytes: Any) -> None:
    if not isinstance(flush_interval, timedelta):
        raise TypeError(f"flush_interval takes a timedelta, not {type(flush_interval).__name__}")
    if flush_interval <= timedelta(0):
        raise ValueError("flush_interval must be positive")
    if not isinstance(max_buffered_bytes, int) or isinstance(max_buffered_bytes, bool):
        raise TypeError(f"max_buffered_bytes takes an int, not {type(max_buffered_bytes).__name__}")
    if max_buffered_bytes <= 0:
        raise ValueError("max_buffered_bytes must be positive")


def _check_chunk(chunk: Any) -> None:
    if not isinstance(chunk, str):
        raise TypeError(f"a buffered text chunk is a str, not {type(chunk).__name__}")


class _Batch:
    """The chunks not yet written, and their size in UTF-8 bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.chunks: list[str] = []
        self.size = 0

    def add(self, chunk: str) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk.encode())

    @property
    def full(self) -> bool:
        return self.size >= self.max_bytes

    def take(self) -> str:
        text = "".join(self.chunks)
        self.chunks.clear()
        self.size = 0
        return text


class AsyncBufferedTextStream:
    """Stream.buffered_text's writer for an async step: `write(chunk)` is a plain call (do not
    await). A timer on the step's event loop (the engine's clock: virtual time in tests) writes
    a batch `flush_interval` after its first chunk; the engine writes what is left when the
    handler ends, and drops it when the attempt is cancelled or timed out. A failed timed
    write is raised by the next `write`."""

    def __init__(self, stream: Stream[str], context: Context, flush_interval: timedelta,
                 max_buffered_bytes: int) -> None:
        self._stream = stream
        self._context = context
        self._interval = flush_interval.total_seconds()
        self._batch = _Batch(max_buffered_bytes)
        self._loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._failure: BaseException | None = None
        self._closed = False

    def write(self, chunk: str) -> None:
        """Add one chunk (an empty one is ignored); a full batch is written at once."""
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise ValueError(f"stream {self._stream.name}: the step this buffered writer belongs to has ended")
        _check_chunk(chunk)
        if not chunk:
            return
        if not self._batch.chunks:
            self._timer = self._loop.call_later(self._interval, self._on_timer)
        self._batch.add(chunk)
        if self._batch.full:
            self._write_batch()

    def _write_batch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._batch.chunks:
            self._stream.write(self._context, self._batch.take())

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed or self._failure is not None:
            return
        try:
            self._write_batch()
        except BaseException as exc:  # kept for the handler's next write, or the end of the step
            self._failure = exc

    def _dex_finish(self) -> None:
        """The handler has ended: write what is left (the engine calls it before the result commits)."""
        if self._closed:
            return
        self._closed = True
        if self._failure is not None:
            raise self._failure
        self._write_batch()

    def _dex_discard(self) -> None:
        """The attempt was cancelled: what is buffered is dropped (best effort, as a Stream is)."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._batch.take()


class BufferedTextStream:
    """Stream.buffered_text's writer for a sync generator step: yield what `write` and `flush`
    return (`yield from writer.write(chunk)`; `yield from writer.flush()` before returning).
    The interval is looked at when a chunk arrives, on the flow's clock."""

    def __init__(self, stream: Stream[str], context: Context, flush_interval: timedelta,
                 max_buffered_bytes: int) -> None:
        self._stream = stream
        self._context = context
        self._interval = flush_interval.total_seconds()
        self._batch = _Batch(max_buffered_bytes)
        self._now: Callable[[], float] = getattr(context, "_dex_now", time.monotonic)
        self._first_at: float | None = None

    def write(self, chunk: str) -> tuple[StepOutput, ...]:
        """Add one chunk; returns the frame of a batch that is due (full, or its interval has
        passed), else nothing."""
        _check_chunk(chunk)
        if not chunk:
            return ()
        if self._first_at is None:
            self._first_at = self._now()
        self._batch.add(chunk)
        if self._batch.full or self._now() - self._first_at >= self._interval:
            return self.flush()
        return ()

    def flush(self) -> tuple[StepOutput, ...]:
        """The frame of what is buffered (nothing when the buffer is empty)."""
        if not self._batch.chunks:
            return ()
        self._first_at = None
        frame = self._stream.write(self._context, self._batch.take())
        return () if frame is None else (frame,)
