"""Stream.buffered_text (SDK 1.23): chunks become fewer messages. An async step's writer flushes
on a timer on the engine's clock (virtual time here) and, when the handler ends, before its
result commits — also when it raises; a cancelled attempt's buffer is dropped. A sync
generator's writer hands back frames to yield, looking at the interval when a chunk arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from datetime import timedelta
from typing import Any

import pytest

from dexcli import (
    AsyncBufferedTextStream,
    AsyncContext,
    BufferedTextStream,
    Context,
    Flow,
    FlowErrorType,
    FlowStatus,
    PersistenceSchema,
    RetryPolicy,
    Step,
    StepDecision,
    StepList,
    StepOptions,
    Stream,
    graceful_complete,
)
from dexcli.sdk.context import StepOutput
from tests.engine.engine_helpers import attempts

TEXT = Stream("Text", str, 1 << 20)
NUMBERS = Stream("Numbers", int, 1 << 20)
Script = list[tuple[float, str]]  # (seconds to sleep first, chunk)


def messages(env: Any, flow_id: str) -> list[tuple[str, float]]:
    """Each message of TEXT, oldest first, with when it was written (seconds after the start)."""
    page = env.client.list_stream_messages(flow_id, TEXT, 1000)
    return [(m.value, round(m.created_time.timestamp() - env.t0, 3)) for m in reversed(page.messages)]


class Chatty(Step[Script]):
    """Writes each chunk of the script through one buffered writer, sleeping first as told."""

    def __init__(self, raise_at_end: bool = False, **options: Any) -> None:
        self.raise_at_end = raise_at_end
        self.options = options

    async def execute(self, context: AsyncContext, script: Script) -> StepDecision:
        writer = TEXT.buffered_text(context, **self.options)
        assert isinstance(writer, AsyncBufferedTextStream)
        for pause, chunk in script:
            if pause:
                await asyncio.sleep(pause)
            writer.write(chunk)
        if self.raise_at_end:
            raise RuntimeError("fails with text still buffered")
        return graceful_complete(len(script))

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))


class TextFlow(Flow[Script]):
    def __init__(self, step: Step[Script]) -> None:
        self.step = step

    def get_steps(self) -> StepList[Script]:
        return StepList.start_step(self.step)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(TEXT, NUMBERS)


def test_an_async_writer_flushes_a_second_after_its_first_chunk_and_at_the_end(env: Any) -> None:
    script = [(0, "a"), (0.5, "b"), (1, "c"), (0, "d"), (5, "e")]
    assert env.run(TextFlow(Chatty()), script, "f").status is FlowStatus.COMPLETED
    # "a" at 0 starts the timer: "ab" goes at 1.0; "c" at 1.5 starts the next one: "cd" at 2.5;
    # "e" at 6.5 is still buffered when the handler returns, and is written before it completes
    assert messages(env, "f") == [("ab", 1.0), ("cd", 2.5), ("e", 6.5)]


def test_an_async_writer_flushes_at_once_when_the_batch_reaches_its_size(env: Any) -> None:
    step = Chatty(max_buffered_bytes=4, flush_interval=timedelta(minutes=1))
    env.run(TextFlow(step), [(0, "ab"), (1, "cdé"), (1, "f"), (0, "g")], "f")
    assert messages(env, "f") == [("abcdé", 1.0), ("fg", 2.0)]  # é is 2 bytes: 6 >= 4; never split


def test_what_is_buffered_is_written_when_the_handler_raises(env: Any) -> None:
    result = env.run(TextFlow(Chatty(raise_at_end=True)), [(0, "last words")], "f")
    assert result.status is FlowStatus.FAILED
    assert messages(env, "f") == [("last words", 0.0)]


class Stuck(Step[Script]):
    async def execute(self, context: AsyncContext, script: Script) -> StepDecision:
        writer = TEXT.buffered_text(context, flush_interval=timedelta(minutes=10))
        writer.write("never sent")
        await asyncio.sleep(3600)
        return graceful_complete(0)

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_method_timeout=timedelta(seconds=30),
                           execute_retry=RetryPolicy(maximum_attempts=1))


def test_a_timed_out_attempt_drops_its_buffer(env: Any) -> None:
    result = env.run(TextFlow(Stuck()), [], "f")
    assert result.status is FlowStatus.FAILED and attempts(env, "f", "Stuck-1")[0]["errorType"] == "StartToClose"
    env.drive()  # its timer, 10 minutes on, writes nothing either
    assert messages(env, "f") == []


class SyncChatty(Step[Script]):
    def execute(self, context: Context, script: Script) -> Generator[StepOutput, None, StepDecision]:
        writer = TEXT.buffered_text(context, max_buffered_bytes=5)
        assert isinstance(writer, BufferedTextStream)
        for _, chunk in script:
            yield from writer.write(chunk)
        yield from writer.flush()
        return graceful_complete(len(script))


def test_a_sync_generator_yields_the_frames_of_full_batches_and_a_last_flush(env: Any) -> None:
    env.run(TextFlow(SyncChatty()), [(0, "abc"), (0, "de"), (0, "f"), (0, "")], "f")
    assert [m for m, _ in messages(env, "f")] == ["abcde", "f"]


class PlainSync(Step[Script]):
    def execute(self, context: Context, script: Script) -> StepDecision:
        TEXT.buffered_text(context)
        return graceful_complete(0)


def test_a_plain_sync_step_cannot_yield_the_frames_and_fails_the_flow_saying_so(env: Any) -> None:
    result = env.run(TextFlow(PlainSync()), [], "f")
    assert result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE
    assert "Text.buffered_text(...) in a sync step gives frames that must be yielded" in (result.error_message or "")


class Misuse(Step[Script]):
    def __init__(self, make: Any) -> None:
        self.make = make

    async def execute(self, context: AsyncContext, script: Script) -> StepDecision:
        self.make(context)
        return graceful_complete(0)

    def get_step_options(self) -> StepOptions:
        return StepOptions(execute_retry=RetryPolicy(maximum_attempts=1))


@pytest.mark.parametrize("make, error", [
    (lambda c: NUMBERS.buffered_text(c), "TypeError: stream Numbers: buffered_text needs a Stream[str]"),
    (lambda c: TEXT.buffered_text(c, flush_interval=1), "TypeError: flush_interval takes a timedelta, not int"),
    (lambda c: TEXT.buffered_text(c, flush_interval=timedelta(0)), "ValueError: flush_interval must be positive"),
    (lambda c: TEXT.buffered_text(c, max_buffered_bytes=0), "ValueError: max_buffered_bytes must be positive"),
    (lambda c: TEXT.buffered_text(c, max_buffered_bytes=True), "TypeError: max_buffered_bytes takes an int"),
    (lambda c: Stream("Other", str, 100).buffered_text(c), "ValueError: stream 'Other' is not in TextFlow's"),
    (lambda c: TEXT.buffered_text(c).write(b"x"), "TypeError: a buffered text chunk is a str, not bytes"),
])
def test_a_writer_is_refused_as_the_sdk_refuses_it(env: Any, make: Any, error: str) -> None:
    env.run(TextFlow(Misuse(make)), [], "f")
    [only] = attempts(env, "f", "Misuse-1")
    assert f"{only['errorType'].rpartition('.')[2]}: {only['detail']}".startswith(error)


class FakeContext:
    """A sync step's context reduced to what a BufferedTextStream uses: the flow's clock and
    the frame a Stream write makes."""

    def __init__(self) -> None:
        self.now = 100.0

    def _dex_now(self) -> float:
        return self.now

    def _dex_stream_write(self, stream: Stream[str], value: str) -> StepOutput:
        return StepOutput("stream", value, stream)


def test_a_sync_writer_flushes_when_a_chunk_arrives_after_the_interval() -> None:
    context = FakeContext()
    writer = BufferedTextStream(TEXT, context, timedelta(seconds=2), 1000)  # type: ignore[arg-type]
    assert writer.write("a") == () and writer.write("") == ()
    context.now += 1.5
    assert writer.write("b") == ()
    context.now += 0.5  # 2 s after "a": the batch is due with this chunk
    assert [f.value for f in writer.write("c")] == ["abc"]
    context.now += 10  # no timer: nothing is written until the next chunk or flush()
    assert [f.value for f in writer.write("d")] == []
    assert [f.value for f in writer.flush()] == ["d"] and writer.flush() == ()
