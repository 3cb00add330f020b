"""Streams — shared capacity per flow type and stream name, oldest trimmed first,
oversized messages dropped without failing the step, never rolled back, source, created time,
resume tokens, list/read through the Client."""

import asyncio
import json

import pytest

from dexcli import (
    AsyncContext,
    Flow,
    FlowStatus,
    LongPollTimeoutError,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    Stream,
    graceful_complete,
)
from tests.engine.engine_helpers import attempts, rel

BIG = 1000  # characters per message: the per-message overhead is small next to it
LOG = Stream("Log", str, 5500)  # room for 5 such messages, not 6
WIDE = Stream("Wide", str, 1 << 20)


def msg(tag: str) -> str:
    return tag + "." * (BIG - len(tag))


class Writer(Step[list[str]]):
    """Writes each input item to LOG (1 s apart); with fail_first, attempt 1 raises at the end."""

    def __init__(self, stream: Stream = LOG, fail_first: bool = False) -> None:
        self.stream = stream
        self.fail_first = fail_first

    async def execute(self, context: AsyncContext, input: list[str]) -> StepDecision:
        for i, item in enumerate(input):
            if i:
                await asyncio.sleep(1)
            self.stream.write(context, f"{item}@{context.attempt}" if self.fail_first else item)
        if self.fail_first and context.attempt == 1:
            raise RuntimeError("fails after writing")
        return graceful_complete(len(input))


class LogFlow(Flow[list[str]]):
    def __init__(self, writer: Writer | None = None) -> None:
        self.writer = writer or Writer()

    def get_steps(self) -> StepList[list[str]]:
        return StepList.start_step(self.writer)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(LOG, WIDE)


class OtherLogFlow(LogFlow):
    """Another flow type with a stream of the same name."""


def tags(values):
    return [v.rstrip(".") for v in values]


def test_capacity_is_shared_by_all_flows_of_the_type_and_oldest_are_trimmed_first(env):
    flow = LogFlow()
    env.run(flow, [msg(f"a{i}") for i in range(1, 6)], "fa")
    assert tags(env.stream_values("fa", "Log")) == ["a1", "a2", "a3", "a4", "a5"]
    env.run(flow, [msg(f"b{i}") for i in range(1, 4)], "fb")
    # fb's three messages trimmed fa's three oldest: capacity is per flow type, not per flow
    assert tags(env.stream_values("fb", "Log")) == ["b1", "b2", "b3"]
    assert tags(env.stream_values("fa", "Log")) == ["a4", "a5"]


def test_capacity_is_per_flow_type(env):
    env.run(LogFlow(), [msg(f"a{i}") for i in range(1, 6)], "fa")
    env.run(OtherLogFlow(), [msg(f"o{i}") for i in range(1, 6)], "fo")
    assert tags(env.stream_values("fa", "Log")) == ["a1", "a2", "a3", "a4", "a5"]
    assert tags(env.stream_values("fo", "Log")) == ["o1", "o2", "o3", "o4", "o5"]


def test_capacity_is_per_stream_name(env):
    flow = LogFlow()
    env.run(flow, [msg(f"a{i}") for i in range(1, 6)], "fa")
    flow.writer.stream = WIDE
    env.run(flow, [msg(f"w{i}") for i in range(1, 8)], "fw")
    assert tags(env.stream_values("fa", "Log")) == ["a1", "a2", "a3", "a4", "a5"]
    assert len(env.stream_values("fw", "Wide")) == 7


def test_a_message_over_100_kib_is_dropped_and_the_step_does_not_fail(env):
    flow = LogFlow(Writer(WIDE))
    result = env.run(flow, ["first", "x" * (101 * 1024), "last"], "f")
    assert result.status is FlowStatus.COMPLETED and result.single_output(int) == 3
    assert env.stream_values("f", "Wide") == ["first", "last"]
    assert len(attempts(env, "f", "Writer-1")) == 1


def test_a_message_that_can_never_fit_is_dropped_without_trimming_others(env):
    result = env.run(LogFlow(), [msg("a1"), msg("a2"), "y" * 6000, msg("a3")], "f")
    assert result.status is FlowStatus.COMPLETED
    assert tags(env.stream_values("f", "Log")) == ["a1", "a2", "a3"]


def test_messages_are_never_rolled_back_nor_deduplicated(env):
    result = env.run(LogFlow(Writer(WIDE, fail_first=True)), ["p"], "f")
    assert result.status is FlowStatus.COMPLETED
    assert env.stream_values("f", "Wide") == ["p@1", "p@2"]


def test_source_created_time_and_resume_tokens(env):
    env.run(LogFlow(Writer(WIDE)), ["m1", "m2", "m3"], "f")
    client = env.client
    first = client.read_stream("f", WIDE, "")
    assert (first.value, first.source, rel(env, first.created_time.isoformat())) == ("m1", "#Writer-1", 0)
    second = client.read_stream("f", WIDE, first.resume_token)
    third = client.read_stream("f", WIDE, second.resume_token)
    assert (second.value, third.value) == ("m2", "m3")
    assert rel(env, third.created_time.isoformat()) == 2
    with pytest.raises(LongPollTimeoutError):
        client.read_stream("f", WIDE, third.resume_token)


def test_list_stream_messages_pages_newest_first(env):
    env.run(LogFlow(Writer(WIDE)), [f"m{i}" for i in range(1, 6)], "f")
    page = env.client.list_stream_messages("f", WIDE, page_size=2)
    assert [m.value for m in page.messages] == ["m5", "m4"]
    page2 = env.client.list_stream_messages("f", WIDE, page_size=2, before_page_token=page.next_page_token)
    assert [m.value for m in page2.messages] == ["m3", "m2"]
    page3 = env.client.list_stream_messages("f", WIDE, page_size=2, before_page_token=page2.next_page_token)
    assert [m.value for m in page3.messages] == ["m1"] and page3.next_page_token == ""


def test_reading_from_a_trimmed_position_starts_at_the_oldest_retained(env):
    flow = LogFlow()
    env.run(flow, [msg(f"a{i}") for i in range(1, 6)], "fa")
    token_a1 = env.client.read_stream("fa", LOG, "").resume_token
    env.run(flow, [msg(f"b{i}") for i in range(1, 4)], "fb")
    assert env.client.read_stream("fa", LOG, "").value.rstrip(".") == "a4"
    assert env.client.read_stream("fa", LOG, token_a1).value.rstrip(".") == "a4"


def test_messages_are_readable_typed_and_per_flow(env):
    flow = LogFlow(Writer(WIDE))
    env.run(flow, ["x1"], "f1")
    env.run(flow, ["y1", "y2"], "f2")
    assert [m.value for m in env.client.list_stream_messages("f1", WIDE, 100).messages] == ["x1"]
    assert [m.value for m in env.client.list_stream_messages("f2", WIDE, 100).messages] == ["y2", "y1"]


def test_a_stream_write_in_a_plain_sync_step_fails_the_flow_instead_of_vanishing(env):
    from dexcli import Context, Flow, FlowErrorType, FlowStatus, StepList, graceful_complete

    lost = Stream("Lost", int, 1 << 20)

    class Writes(Step[int]):
        def execute(self, context: Context, n: int) -> StepDecision:
            lost.write(context, n)  # a frame nobody yields
            return graceful_complete(n)

    class SyncWriteFlow(Flow[int]):
        def get_steps(self) -> StepList[int]:
            return StepList.start_step(Writes())

        def get_persistence_schema(self) -> PersistenceSchema:
            return PersistenceSchema.of(lost)

    result = env.run(SyncWriteFlow(), 1, flow_id="sw")
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.INVALID_USER_FLOW_CODE
    assert "must be yielded" in (result.error_message or "")
    assert len(attempts(env, "sw", "Writes-1")) == 1  # not retried: retrying cannot help


def test_many_messages_in_one_transaction_keep_the_usage_exact(env):
    """Group commits append many messages per transaction; usage is read once, kept in
    memory and written at commit — and a rolled-back transaction leaves it as it was."""
    store = env.store

    def usage():
        rows = store.read(lambda tx: tx.c.execute(
            "SELECT bytes FROM stream_usage WHERE flow_type = 'T' AND stream = 'S'").fetchall())
        return rows[0][0] if rows else 0

    def stored():
        return [json.loads(m.value) for m in store.stream_messages("f", "S", limit=100)]

    with store.tx() as tx:
        for i in range(7):  # capacity 5 messages of 100 bytes: the first two are trimmed
            tx.append_stream("T", "S", "f", "#s", json.dumps(f"m{i}"), 0.0, 100, 500)
    assert stored() == [f"m{i}" for i in range(2, 7)]
    assert usage() == 500
    with pytest.raises(RuntimeError), store.tx() as tx:
        tx.append_stream("T", "S", "f", "#s", json.dumps("rolled back"), 0.0, 100, 500)
        raise RuntimeError("the whole transaction rolls back")
    assert stored() == [f"m{i}" for i in range(2, 7)] and usage() == 500
    with store.tx() as tx:  # the next transaction starts from the stored usage
        tx.append_stream("T", "S", "f", "#s", json.dumps("m7"), 0.0, 60, 500)
        tx.append_stream("T", "S", "f", "#s", json.dumps("m8"), 0.0, 60, 500)
    assert stored() == [f"m{i}" for i in range(4, 9)] and usage() == 420
