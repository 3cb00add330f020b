"""The rest of SDK 1.23's client surface, locally: `health_check` reports on the local database,
`describe_flow` and `read_stream` check their arguments as the SDK does and read the store with
the SDK's resume semantics, on both clients; every DexServiceError carries its `sub_status`."""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dexcli import (
    AsyncClient,
    AsyncContext,
    Client,
    DexServiceError,
    ErrorSubStatus,
    Flow,
    FlowAlreadyStartedError,
    FlowDefinitionError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowStatus,
    LongPollTimeoutError,
    PersistenceSchema,
    RpcLockConflictError,
    Step,
    StepDecision,
    StepList,
    Stream,
    WorkerInvocationError,
    graceful_complete,
)
from dexcli.engine.clock import run as run_on_clock
from dexcli_flows.three_steps import ThreeStepFlow

NOTES = Stream("Notes", str, 1 << 16)


class Notes(Step[list[str]]):
    """Writes each note 10 s apart, then completes."""

    async def execute(self, context: AsyncContext, notes: list[str]) -> StepDecision:
        for note in notes:
            await asyncio.sleep(10)
            NOTES.write(context, note)
        return graceful_complete(len(notes))


class NotesFlow(Flow[list[str]]):
    def get_steps(self) -> StepList[list[str]]:
        return StepList.start_step(Notes())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of(NOTES)


# --- health_check ------------------------------------------------------------------------------


def test_health_check_is_true_on_a_usable_database(tmp_path: Path) -> None:
    with Client([ThreeStepFlow()], db=tmp_path / "dex.db") as client:
        assert client.health_check() is True


def test_health_check_fails_once_the_client_is_closed(tmp_path: Path) -> None:
    client = Client([ThreeStepFlow()], db=tmp_path / "dex.db")
    client.close()
    with pytest.raises(DexServiceError, match="closed") as caught:
        client.health_check()
    assert caught.value.sub_status is ErrorSubStatus.UNCATEGORIZED


def test_health_check_fails_when_the_database_file_was_replaced(tmp_path: Path) -> None:
    path = tmp_path / "dex.db"
    with Client([ThreeStepFlow()], db=path) as client:
        client.start_flow(ThreeStepFlow(), "f", 1)
        os.replace(path, tmp_path / "moved.db")
        with pytest.raises(DexServiceError, match="deleted or replaced"):
            client.health_check()


def test_health_check_fails_when_the_database_is_not_readable(tmp_path: Path) -> None:
    with Client([ThreeStepFlow()], db=tmp_path / "dex.db") as client:
        client.store.close()  # what a database gone from under the client looks like to it
        with pytest.raises(DexServiceError, match="unhealthy: the database .* is closed"):
            client.health_check()


def test_the_async_client_checks_health_too(tmp_path: Path) -> None:
    async def check() -> tuple[bool, str]:
        client = AsyncClient([ThreeStepFlow()], db=tmp_path / "dex.db")
        healthy = await client.health_check()
        await client.close()
        try:
            await client.health_check()
        except DexServiceError as exc:
            return healthy, str(exc)
        return healthy, ""

    assert asyncio.run(check()) == (True, "the client is closed")


def test_the_health_answer_names_this_host(env: Any) -> None:
    info = env.client._ops.health(False)
    assert (info.condition, info.hostname, info.duration_seconds) == ("OK", socket.gethostname(), 0)


# --- describe_flow -----------------------------------------------------------------------------


@pytest.mark.parametrize("flow_id", ["", "   "])
def test_describe_flow_refuses_an_empty_id_as_the_sdk(env: Any, flow_id: str) -> None:
    with pytest.raises(ValueError, match="durable name is required"):
        env.client.describe_flow(flow_id)


def test_describe_flow_gives_the_latest_run_on_both_clients(env: Any) -> None:
    env.start(NotesFlow(), ["a"], "f")
    info = env.client.describe_flow("f")
    assert (info.flow_id, info.flow_type, info.status) == ("f", "NotesFlow", FlowStatus.RUNNING)
    assert info.run_id == env.store.get_flow("f").run_id and info.started_at.tzinfo is not None
    env.client.wait_for_flow("f")

    async def describe() -> Any:
        return await AsyncClient(engine=env.engine).describe_flow("f")

    later = run_on_clock(describe, env.clock)
    assert (later.run_id, later.status) == (info.run_id, FlowStatus.COMPLETED)
    with pytest.raises(FlowNotFoundError) as caught:
        env.client.describe_flow("nope")
    assert caught.value.sub_status is ErrorSubStatus.FLOW_NOT_EXISTS


# --- read_stream -------------------------------------------------------------------------------


def test_read_stream_resumes_after_each_token_and_refuses_one_it_never_gave(env: Any) -> None:
    env.run(NotesFlow(), ["n1", "n2"], "f")
    first = env.client.read_stream("f", NOTES, "")
    assert (first.value, env.client.read_stream("f", NOTES, first.resume_token).value) == ("n1", "n2")
    with pytest.raises(DexServiceError, match="invalid Stream resume token 'abc'"):
        env.client.read_stream("f", NOTES, "abc")
    with pytest.raises(ValueError, match="durable name is required"):
        env.client.read_stream("", NOTES, "")


def test_read_stream_reads_what_a_client_wrote_to_an_id_with_no_flow(env: Any) -> None:
    env.run(NotesFlow(), [], "other")  # NOTES is now registered with the client's engine
    env.client.write_stream("no-such-flow", NOTES, "ops", "hello")
    message = env.client.read_stream("no-such-flow", NOTES, "")
    assert (message.value, message.source) == ("hello", "ops")
    with pytest.raises(LongPollTimeoutError) as caught:  # nothing more can come: no flow runs there
        env.client.read_stream("no-such-flow", NOTES, message.resume_token)
    assert caught.value.sub_status is ErrorSubStatus.LONG_POLL_TIMEOUT


def test_the_async_client_long_polls_with_the_same_resume_semantics(env: Any) -> None:
    env.start(NotesFlow(), ["n1", "n2"], "f")
    client = AsyncClient(engine=env.engine)

    async def read() -> list[tuple[str, float]]:
        first = await client.read_stream("f", NOTES, "")
        second = await client.read_stream("f", NOTES, first.resume_token)
        again = await client.read_stream("f", NOTES, "")
        return [(m.value, round(m.created_time.timestamp() - env.t0)) for m in (first, second, again)]

    assert run_on_clock(read, env.clock) == [("n1", 10), ("n2", 20), ("n1", 10)]

    async def too_soon() -> None:
        await client.read_stream("f", NOTES, "zz", timeout=timedelta(seconds=5))

    with pytest.raises(DexServiceError, match="invalid Stream resume token"):
        run_on_clock(too_soon, env.clock)


def test_a_stream_no_registered_flow_holds_is_refused_as_the_sdk_refuses_it(env: Any) -> None:
    env.run(NotesFlow(), ["n1"], "f")
    lookalike = Stream("Notes", str, 1 << 16)  # equal, but not the Stream NotesFlow registered
    calls = [lambda: env.client.read_stream("f", lookalike, ""),
             lambda: env.client.list_stream_messages("f", lookalike, 5),
             lambda: env.client.write_stream("f", lookalike, "ops", "x")]
    for call in calls:
        with pytest.raises(FlowDefinitionError, match="Stream is not registered: Notes"):
            call()
    assert env.client.read_stream("f", NOTES, "").value == "n1"


# --- ErrorSubStatus on what the clients raise ---------------------------------------------------


def test_each_service_error_dex_raises_carries_its_sub_status(env: Any) -> None:
    env.start(NotesFlow(), ["a"], "f")
    with pytest.raises(FlowAlreadyStartedError) as started:
        env.client.start_flow(NotesFlow(), "f", ["a"])
    with pytest.raises(FlowNotActiveOrNotFoundError) as stopped:
        env.client.stop_flow("nope")
    with pytest.raises(LongPollTimeoutError) as waited:
        env.client.wait_for_flow("f", timeout=timedelta(seconds=1))
    assert [e.value.sub_status for e in (started, stopped, waited)] == [
        ErrorSubStatus.FLOW_ALREADY_STARTED, ErrorSubStatus.FLOW_NOT_EXISTS, ErrorSubStatus.LONG_POLL_TIMEOUT]
    assert waited.value.detail == str(waited.value)
    assert WorkerInvocationError("E", "x").sub_status is ErrorSubStatus.WORKER_API_ERROR
    assert RpcLockConflictError("held").sub_status is ErrorSubStatus.WORKER_API_ERROR


def test_a_flow_written_against_the_official_module_paths_runs(env: Any) -> None:
    from tests.parity.corpus.submodule_imports import TEXT, SummaryFlow

    result = env.run(SummaryFlow(), "example.org", "f")
    assert result.status is FlowStatus.COMPLETED and result.completions[0].output == len("example.org")
    [message] = env.client.list_stream_messages("f", TEXT, 10).messages
    assert message.value == "a summary of example.org " and message.source == "#Summarize-1"
    assert round(message.created_time.timestamp() - env.t0) == 5 + 30  # retried after 5 s, waited 30 s


def test_a_client_write_to_an_id_with_no_flow_shares_the_capacity_of_the_streams_flow_type(env: Any) -> None:
    from tests.engine.test_streams import LOG, LogFlow, msg

    env.run(LogFlow(), [msg(f"a{i}") for i in range(1, 6)], "fa")  # LOG holds 5 such messages, not 6
    env.client.write_stream("ghost", LOG, "ops", msg("g1"))
    assert env.client.read_stream("fa", LOG, "").value.rstrip(".") == "a2"  # a1 trimmed to make room
    assert env.client.read_stream("ghost", LOG, "").value.rstrip(".") == "g1"
