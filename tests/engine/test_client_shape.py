"""The clients' shape as the official SDK's: timeouts are timedeltas of whole
seconds, read_stream long-polls (the sync client drives the flow until a message arrives), both
clients are context managers with close(), and results carry the SDK's enums, mapped from the
store's upper-case states by member name."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    AsyncContext,
    Client,
    Flow,
    FlowErrorType,
    FlowStatus,
    LongPollTimeoutError,
    PersistenceSchema,
    Step,
    StepDecision,
    StepList,
    StopFlowOptions,
    StopType,
    Stream,
    graceful_complete,
)
from dexcli_flows.three_steps import ThreeStepFlow

NOTES = Stream("Notes", str, 1 << 16)


class Notes(Step[int]):
    """Writes one note after `n` seconds, completes 30 s later."""

    async def execute(self, context: AsyncContext, n: int) -> StepDecision:
        await asyncio.sleep(n)
        NOTES.write(context, f"after {n} s")
        await asyncio.sleep(30)
        return graceful_complete(n)


class NotesFlow(Flow[int]):
    def __init__(self) -> None:
        self.notes = Notes()

    def get_steps(self) -> StepList[int]:
        return StepList.start_step(self.notes)

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NOTES)


def elapsed(env: Any) -> float:
    return round(env.clock.now() - env.t0, 3)


def test_wait_for_flow_takes_a_timedelta(env: Any) -> None:
    env.start(NotesFlow(), 20, "f")
    with pytest.raises(LongPollTimeoutError, match="still RUNNING"):
        env.client.wait_for_flow("f", timeout=timedelta(seconds=10))
    assert elapsed(env) == 10
    assert env.client.wait_for_flow("f", timeout=timedelta(minutes=5)).status is FlowStatus.COMPLETED


@pytest.mark.parametrize("timeout, error", [
    (12, TypeError), (12.0, TypeError), (timedelta(seconds=1.5), ValueError), (timedelta(seconds=-1), ValueError),
])
def test_a_timeout_that_is_not_whole_non_negative_seconds_is_refused(env: Any, timeout: Any, error: type) -> None:
    env.start(NotesFlow(), 20, "f")
    with pytest.raises(error):
        env.client.wait_for_flow("f", timeout=timeout)
    with pytest.raises(error):
        env.client.read_stream("f", NOTES, "", timeout=timeout)
    assert elapsed(env) == 0  # refused before anything ran


def test_read_stream_drives_the_flow_until_a_message_arrives(env: Any) -> None:
    env.start(NotesFlow(), 20, "f")
    message = env.client.read_stream("f", NOTES, "")
    assert message.value == "after 20 s" and 20 <= elapsed(env) <= 20.1
    assert env.client.wait_for_flow("f").status is FlowStatus.COMPLETED
    newest = env.client.list_stream_messages("f", NOTES, 1).messages[0]
    with pytest.raises(LongPollTimeoutError):  # the flow has ended: nothing can follow its last message
        env.client.read_stream("f", NOTES, newest.resume_token)


def test_read_stream_gives_up_at_its_timeout(env: Any) -> None:
    env.start(NotesFlow(), 20, "f")
    with pytest.raises(LongPollTimeoutError):
        env.client.read_stream("f", NOTES, "", timeout=timedelta(seconds=5))
    assert elapsed(env) == 5
    # the attempt that drive left behind is lost at its heartbeat deadline (60 s) and retried
    assert env.client.read_stream("f", NOTES, "", timeout=timedelta(minutes=5)).value == "after 20 s"


def test_the_client_is_a_context_manager_that_closes_its_database(tmp_path: Path) -> None:
    with Client([ThreeStepFlow()], db=tmp_path / "dex.db") as client:
        client.start_flow(ThreeStepFlow(), "f", 1)
        assert client.wait_for_flow("f").single_output(int) == 7
    with pytest.raises(Exception, match="closed"):
        client.store.get_flow("f")
    client.close()  # idempotent


def test_closing_a_client_leaves_an_engine_it_was_given_open(env: Any) -> None:
    with Client(engine=env.engine) as client:
        client.start_flow(ThreeStepFlow(), "f", 1)
    assert env.client.wait_for_flow("f").status is FlowStatus.COMPLETED


def test_the_async_client_is_an_async_context_manager(tmp_path: Path) -> None:
    async def use() -> AsyncClient:
        async with AsyncClient([ThreeStepFlow()], db=tmp_path / "dex.db") as client:
            await client.start_flow(ThreeStepFlow(), "f", 1)
            assert (await client.wait_for_flow("f")).single_output(int) == 7
        await client.close()
        return client

    client = asyncio.run(use())
    with pytest.raises(Exception, match="closed"):
        client.store.get_flow("f")


def test_results_carry_the_sdk_enums_by_member_name(env: Any) -> None:
    env.start(NotesFlow(), 20, "f")
    env.client.stop_flow("f", StopFlowOptions(type=StopType.FAIL, reason="enough"))
    result = env.result("f")
    assert (result.status, result.error_type) == (FlowStatus.FAILED, FlowErrorType.CLIENT_API_FAILED)
    assert (result.status.value, result.error_type.value) == ("failed", "client_api_failed")
    assert env.inspect("f")["summary"]["flowStatus"] == "FAILED"  # the JSON contract stays upper-case
    assert env.client.describe_flow("f").status is FlowStatus("failed")
