"""Client: Dex's client API over the local engine (start_flow, wait_for_flow, streams, ...).

There is no server: `wait_for_flow` drives the flow in this process until it ends (or
`timeout` seconds of the engine's clock pass), which is what a local worker + server would do.
The CLI and the tests use this same facade.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dexcli.engine.clock import Clock
from dexcli.engine.core import Engine
from dexcli.engine.runner import Runner
from dexcli.graph.checks import static_problems
from dexcli.sdk.codec import decode, encode, from_jsonable
from dexcli.sdk.errors import FlowNotFoundError, LongPollTimeoutError, ValueMappingError
from dexcli.sdk.flow import Flow
from dexcli.sdk.registry import Registry
from dexcli.sdk.results import (
    FlowErrorType,
    FlowInfo,
    FlowResult,
    FlowStatus,
    StartFlowOptions,
    StepCompletion,
    StopFlowOptions,
)
from dexcli.sdk.stream import MAX_MESSAGE_BYTES, Stream, StreamMessage, StreamMessagesPage, message_size
from dexcli.store import FlowRecord, Store, StreamRecord


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)


class _Ops:
    """The client operations both clients share; each client exposes them in its own form."""


    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def store(self) -> Store:
        return self.engine.store

    def flow(self, flow_id: str) -> FlowRecord:
        flow = self.store.get_flow(flow_id)
        if flow is None:
            raise FlowNotFoundError(f"no flow with id {flow_id!r}")
        return flow

    def result(self, flow_id: str) -> FlowResult:
        flow = self.flow(flow_id)
        completions = tuple(StepCompletion(c["stepType"], c["stepExecutionId"], c["output"])
                            for c in json.loads(flow.completions))
        return FlowResult(
            status=FlowStatus[flow.status.name], completions=completions,
            error_type=FlowErrorType(flow.error_type) if flow.error_type else None,
            error_message=flow.error_message,
        )

    def final(self, flow_id: str) -> FlowResult:
        result = self.result(flow_id)
        if not result.is_terminal:
            raise LongPollTimeoutError(f"flow {flow_id} is still {result.status.value}")
        return result

    def describe(self, flow_id: str) -> FlowInfo:
        flow = self.flow(flow_id)
        return FlowInfo(flow.flow_id, flow.run_id, flow.flow_type, FlowStatus[flow.status.name],
                        _dt(flow.start_time))

    def start(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None,
                   options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        options = options or StartFlowOptions()
        return self.engine.start_flow(flow, flow_id, input, flow_ref=flow_ref, request_id=options.request_id,
                                      ignore_already_started=options.ignore_already_started)

    def stop(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        options = options or StopFlowOptions()
        self.engine.stop_flow(flow_id, options.type.value, options.reason)

    def list_messages(self, flow_id: str, stream: Stream[Any], page_size: int = 100,
                             before_page_token: str = "") -> StreamMessagesPage[Any]:
        """Newest first, non-blocking. Pass `next_page_token` back to read older messages."""
        page_size = max(1, min(page_size, 1000))
        before = int(before_page_token) if before_page_token else None
        rows = self.store.stream_messages(flow_id, stream.name, limit=page_size + 1, newest_first=True,
                                          before_id=before)
        msgs = tuple(self._message(r, stream) for r in rows[:page_size])
        token = str(rows[page_size - 1].id) if len(rows) > page_size else ""
        return StreamMessagesPage(msgs, token)

    def _message(self, r: StreamRecord, stream: Stream[Any]) -> StreamMessage[Any]:
        return StreamMessage(decode(r.value, stream.value_type), str(r.id), _dt(r.created_time), r.source)

    def next_message(self, flow_id: str, stream: Stream[Any], resume_token: str) -> StreamMessage[Any] | None:
        after = int(resume_token) if resume_token else 0
        rows = self.store.stream_messages(flow_id, stream.name, after_id=after, limit=1)
        return self._message(rows[0], stream) if rows else None

    def write_message(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        """Write one message as a client. Rejected (ValueMappingError) when it can never fit."""
        if not source:
            raise ValueError("write_stream needs a non-empty source")
        text = encode(from_jsonable(json.loads(encode(value)), stream.value_type))
        size = message_size(text, flow_id, source)
        flow = self.store.get_flow(flow_id)
        flow_type = flow.flow_type if flow else ""
        if size > MAX_MESSAGE_BYTES or size > stream.stream_capacity_bytes:
            raise ValueMappingError(f"stream message of {size} bytes does not fit (RESOURCE_EXHAUSTED)")
        with self.store.tx() as tx:
            token = tx.append_stream(flow_type, stream.name, flow_id, source, text, self.engine.clock.now(), size,
                                     stream.stream_capacity_bytes)
        return str(token)

    def deadline(self, timeout: float | None) -> float | None:
        return None if timeout is None else self.engine.clock.now() + timeout


def _engine(registry: Registry | list[Flow[Any]] | None, db: str | Path | None, clock: Clock | None,
            engine: Engine | None) -> Engine:
    if engine is not None:
        return engine
    if db is None:
        raise ValueError("Client needs db=PATH (or an engine)")
    store = Store(db)
    reg = registry if isinstance(registry, Registry) else Registry(list(registry or []), checks=static_problems)
    return Engine(store, clock or Clock(offset=store.clock_offset()), reg)


class Client:
    """Synchronous client. `wait_for_flow` runs the engine on this thread until the flow ends."""

    def __init__(self, registry: Registry | list[Flow[Any]] | None = None, *, db: str | Path | None = None,
                 clock: Clock | None = None, engine: Engine | None = None) -> None:
        self.engine = _engine(registry, db, clock, engine)
        self._ops = _Ops(self.engine)

    @property
    def store(self) -> Store:
        return self.engine.store

    def result(self, flow_id: str) -> FlowResult:
        return self._ops.result(flow_id)

    def describe_flow(self, flow_id: str) -> FlowInfo:
        return self._ops.describe(flow_id)

    def start_flow(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None,
                   options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        return self._ops.start(flow, flow_id, input, options, flow_ref=flow_ref)

    def stop_flow(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        self._ops.stop(flow_id, options)

    def list_stream_messages(self, flow_id: str, stream: Stream[Any], page_size: int = 100,
                             before_page_token: str = "") -> StreamMessagesPage[Any]:
        """Newest first, non-blocking. Pass `next_page_token` back to read older messages."""
        return self._ops.list_messages(flow_id, stream, page_size, before_page_token)

    def write_stream(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        """Write one message as a client. Rejected (ValueMappingError) when it can never fit."""
        return self._ops.write_message(flow_id, stream, source, value)

    def wait_for_flow(self, flow_id: str, timeout: float | None = None) -> FlowResult:
        self._ops.flow(flow_id)
        runner = Runner(self.engine)
        runner.drive([flow_id], until=runner.closed(flow_id), deadline=self._ops.deadline(timeout))
        return self._ops.final(flow_id)

    def read_stream(self, flow_id: str, stream: Stream[Any], resume_token: str = "",
                    timeout: float | None = None) -> StreamMessage[Any]:
        msg = self._ops.next_message(flow_id, stream, resume_token)
        if msg is None:
            raise LongPollTimeoutError(f"no message on {stream.name} after token {resume_token or '(start)'}")
        return msg


class AsyncClient:
    """Asynchronous client for code already running on the engine's event loop: the Client's
    methods as coroutines. Starts made together (e.g. under asyncio.gather) share one commit."""

    def __init__(self, registry: Registry | list[Flow[Any]] | None = None, *, db: str | Path | None = None,
                 clock: Clock | None = None, engine: Engine | None = None) -> None:
        self.engine = _engine(registry, db, clock, engine)
        self._ops = _Ops(self.engine)

    @property
    def store(self) -> Store:
        return self.engine.store

    def result(self, flow_id: str) -> FlowResult:
        return self._ops.result(flow_id)

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        return self._ops.describe(flow_id)

    async def start_flow(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None,
                         options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        options = options or StartFlowOptions()
        return await self.engine.start_flow_async(
            flow, flow_id, input, flow_ref=flow_ref, request_id=options.request_id,
            ignore_already_started=options.ignore_already_started)

    async def stop_flow(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        self._ops.stop(flow_id, options)

    async def list_stream_messages(self, flow_id: str, stream: Stream[Any], page_size: int = 100,
                                   before_page_token: str = "") -> StreamMessagesPage[Any]:
        return self._ops.list_messages(flow_id, stream, page_size, before_page_token)

    async def write_stream(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        return self._ops.write_message(flow_id, stream, source, value)

    async def wait_for_flow(self, flow_id: str, timeout: float | None = None) -> FlowResult:
        self._ops.flow(flow_id)
        runner = Runner(self.engine)
        await runner.drive_async([flow_id], until=runner.closed(flow_id), deadline=self._ops.deadline(timeout))
        return self._ops.final(flow_id)

    async def read_stream(self, flow_id: str, stream: Stream[Any], resume_token: str = "",
                          timeout: float | None = None) -> StreamMessage[Any]:
        """Long-polls on the engine's clock until a message after `resume_token` arrives."""
        deadline = self._ops.deadline(timeout)
        while True:
            msg = self._ops.next_message(flow_id, stream, resume_token)
            if msg is not None:
                return msg
            if deadline is not None and self.engine.clock.now() >= deadline:
                raise LongPollTimeoutError(f"no message on {stream.name} within {timeout} s")
            await asyncio.sleep(0.1)
