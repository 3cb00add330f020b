"""Client: Dex's client API over the local engine (start_flow, wait_for_flow, streams, ...).

There is no server: `wait_for_flow` drives the flow in this process until it ends (or its
`timeout` passes on the engine's clock), which is what a local worker + server would do;
`read_stream` drives it until a message arrives. Timeouts are `timedelta`s of whole seconds,
as the official SDK's. Both clients are context managers with `close()` (idempotent: it closes
the database the client opened with `db=`). The CLI and the tests use this same facade.
"""

from __future__ import annotations

import functools
import inspect
import json
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from dexcli.builder import build_engine
from dexcli.client_waits import WaitOps
from dexcli.engine import ContinueAsNew, Engine, SkipTimer, StopFlow, TimeTravelRequest, UpdateFlowConfig
from dexcli.engine.clock import Clock, flow_time
from dexcli.engine.flow_config import config_fields
from dexcli.sdk.codec import decode, encode, from_jsonable
from dexcli.sdk.conditions import StepExecutionId, TimerId
from dexcli.sdk.errors import (
    DexServiceError,
    FlowDefinitionError,
    FlowNotFoundError,
    LongPollTimeoutError,
    StatusCode,
    ValueMappingError,
)
from dexcli.sdk.flow import Flow
from dexcli.sdk.flow_config import FlowConfig
from dexcli.sdk.options import fits_seconds32
from dexcli.sdk.registry import FlowDefinition, Registry
from dexcli.sdk.results import (
    FlowErrorType,
    FlowInfo,
    FlowResult,
    FlowStatus,
    HealthInfo,
    StartFlowOptions,
    StepCompletion,
    StopFlowOptions,
    TimeTravelOptions,
)
from dexcli.sdk.rpc import RPCInvokeOptions
from dexcli.sdk.search import SearchFlowsPage
from dexcli.sdk.stream import MAX_MESSAGE_BYTES, Stream, StreamMessage, StreamMessagesPage, message_size
from dexcli.sdk.wait_options import WaitForStepCompletionOptions
from dexcli.store import FlowRecord, FlowState, Store, StoreError, StreamRecord


def _dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=UTC)


def _require_id(flow_id: str) -> str:
    """A flow id as the official SDK checks one before any call: not empty, not only spaces."""
    if not flow_id.strip():
        raise ValueError("durable name is required")
    return flow_id


def _token(resume_token: str) -> int:
    """A Stream resume token (the id of the last message read; "" before the first): any
    other text is refused, as the server refuses a token it did not give."""
    if not resume_token:
        return 0
    if not resume_token.isdigit():
        raise DexServiceError(f"invalid Stream resume token {resume_token!r}: pass back a message's resume_token",
                              code=StatusCode.INVALID_ARGUMENT)
    return int(resume_token)


def _timeout_seconds(timeout: timedelta | None, what: str) -> float | None:
    """A client timeout as seconds, checked as the official SDK checks it."""
    if timeout is None:
        return None
    if not isinstance(timeout, timedelta):
        raise TypeError(f"{what}(timeout=...) takes a timedelta, as the official SDK: "
                        f"timeout=timedelta(seconds=...), not {type(timeout).__name__}")
    seconds = timeout.total_seconds()
    if not fits_seconds32(seconds):
        raise ValueError("duration must be whole seconds within int32")
    return seconds


class _Ops(WaitOps):
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
        # the server answers a canceled or terminated run with its status only (the reason stays
        # in dex's row, for inspect and the live view)
        quiet = flow.status in (FlowState.CANCELED, FlowState.TERMINATED)
        return FlowResult(  # the store's states and error types map to the SDK's enums by name
            status=FlowStatus[flow.status.name], completions=completions,
            error_type=FlowErrorType[flow.error_type] if flow.error_type else None,
            error_message=None if quiet else flow.error_message,
        )

    def final(self, flow_id: str) -> FlowResult:
        self.answer()
        result = self.result(flow_id)
        if not result.is_terminal:
            raise LongPollTimeoutError(f"flow {flow_id} is still {result.status.name}")
        return result

    def describe(self, flow_id: str) -> FlowInfo:
        self.answer()
        flow = self.flow(_require_id(flow_id))
        return FlowInfo(flow.flow_id, flow.run_id, flow.flow_type, FlowStatus[flow.status.name],
                        _dt(flow.start_time))

    def start(self, flow: Flow[Any], flow_id: str | None, input: Any,
              options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        # None (no options) takes start_request's short way: the defaults, without resolving them (~8 µs)
        return self.engine.start_flow(flow, flow_id, input, flow_ref=flow_ref, options=options)

    def stop(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        options = options or StopFlowOptions()
        self.engine.change(StopFlow(flow_id, options.type.name, options.reason))

    def time_travel(self, flow_id: str, options: TimeTravelOptions) -> str:
        when = options.history_event_time
        if when is not None and when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return self.engine.change(TimeTravelRequest(
            _require_id(flow_id), options.type.name, None if when is None else when.timestamp(), options.step_type,
            options.step_execution_id, None if options.step_method is None else options.step_method.name,
            options.reason, options.skip_writes_reapply))

    def skip_timer(self, flow_id: str, step_execution_id: StepExecutionId, timer_id: TimerId) -> None:
        self.engine.change(SkipTimer(flow_id, str(step_execution_id), timer_id.condition_id,
                                     timer_id.condition_index))

    def update_config(self, flow_id: str, config: FlowConfig) -> None:
        fields = config_fields(config, "update_flow_config")  # checked before the flow is looked up
        self.engine.change(UpdateFlowConfig(_require_id(flow_id), fields))

    def continue_as_new(self, flow_id: str) -> None:
        self.engine.change(ContinueAsNew(_require_id(flow_id)))

    def health(self, closed: bool) -> HealthInfo:
        """The local service's health: its database can be read (DexServiceError if not)."""
        started = time.monotonic()
        if closed:
            raise DexServiceError("the client is closed", code=StatusCode.UNAVAILABLE)
        try:
            self.store.check_usable()
        except StoreError as exc:
            raise DexServiceError(f"unhealthy: {exc}", code=StatusCode.UNAVAILABLE) from exc
        return HealthInfo("OK", socket.gethostname(), int(time.monotonic() - started))

    def stream_flow(self, stream: Stream[Any]) -> FlowDefinition:
        """The registered flow whose schema holds this very Stream object: as the SDK's client,
        a Stream is read or written only through the flows the client knows."""
        for definition in self.engine.definitions.registry:
            if any(s is stream for s in definition.streams.values()):
                return definition
        raise FlowDefinitionError(f"Stream is not registered: {stream.name}")

    def list_messages(self, flow_id: str, stream: Stream[Any], page_size: int,
                             before_page_token: str = "") -> StreamMessagesPage[Any]:
        """Newest first, non-blocking. Pass `next_page_token` back to read older messages."""
        self.stream_flow(stream)
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
        """The oldest retained message after the token's: with "" (or a token whose message
        was trimmed since) the oldest retained one."""
        self.stream_flow(stream)
        rows = self.store.stream_messages(_require_id(flow_id), stream.name, after_id=_token(resume_token), limit=1)
        return self._message(rows[0], stream) if rows else None

    def write_message(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        """Write one message as a client. Rejected (ValueMappingError) when it can never fit."""
        if not source:
            raise ValueError("write_stream needs a non-empty source")
        flow_type = self.stream_flow(stream).flow_type  # capacity is shared per flow type and stream
        text = encode(from_jsonable(json.loads(encode(value)), stream.value_type))
        size = message_size(text, flow_id, source)
        if size > MAX_MESSAGE_BYTES or size > stream.stream_capacity_bytes:
            raise ValueMappingError(f"stream message of {size} bytes does not fit (RESOURCE_EXHAUSTED)")
        now = flow_time(self.engine.clock, self.store, flow_id)
        with self.store.tx() as tx:
            token = tx.append_stream(flow_type, stream.name, flow_id, source, text, now, size,
                                     stream.stream_capacity_bytes)
        return str(token)

    def deadline(self, timeout: timedelta | None, what: str) -> float | None:
        seconds = _timeout_seconds(timeout, what)
        return None if seconds is None else self.engine.clock.now() + seconds

    def no_message(self, flow_id: str, stream: Stream[Any], resume_token: str) -> LongPollTimeoutError:
        return LongPollTimeoutError(f"no message on {stream.name} of flow {flow_id} after token "
                                    f"{resume_token or '(start)'}")


class _Closing:
    """close() and the context-manager protocol of both clients: closing releases the database
    the client opened itself (db=...), never an engine it was given."""

    engine: Engine
    _owns_store: bool = False
    _closed: bool = False

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns_store:
                self.engine.store.close()


def _engine(registry: Registry | list[Flow[Any]] | None, db: str | Path | None, clock: Clock | None,
            engine: Engine | None, *, allow_async_handlers: bool) -> Engine:
    """The engine a client runs flows on. Given a list of flows instead of a Registry, the client
    registers them as the official SDK's clients expect: sync handlers only for Client (as for a
    Worker), async ones too for AsyncClient (as for an AsyncWorker)."""
    if engine is not None:
        return engine
    if db is None:
        raise ValueError("Client needs db=PATH (or an engine)")
    return build_engine(db, flows=registry, clock=clock, allow_async_handlers=allow_async_handlers)


class Client(_Closing):
    """Synchronous client. `wait_for_flow` runs the engine on this thread until the flow ends."""

    def __init__(self, registry: Registry | list[Flow[Any]] | None = None, *, db: str | Path | None = None,
                 clock: Clock | None = None, engine: Engine | None = None) -> None:
        self.engine = _engine(registry, db, clock, engine, allow_async_handlers=False)
        self._owns_store = engine is None
        self._ops = _Ops(self.engine)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exception_type: type[BaseException] | None, exception: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the database this client opened (db=...). Idempotent."""
        self._close()

    @property
    def store(self) -> Store:
        return self.engine.store

    def result(self, flow_id: str) -> FlowResult:
        return self._ops.result(flow_id)

    def describe_flow(self, flow_id: str) -> FlowInfo:
        """The current (or latest) run of `flow_id`: its run id, type, status and start time.
        FlowNotFoundError if there is none."""
        return self._ops.describe(flow_id)

    def health_check(self) -> bool:
        """True when the local service can serve calls: its database is open and readable (and
        still the file at its path). DexServiceError if not."""
        self._ops.health(self._closed)
        return True

    def start_flow(self, flow: Flow[Any], flow_id: str | None, input: Any,
                   options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        """Start `flow`; returns its run id. A None flow_id (dexcli only) generates one."""
        return self._ops.start(flow, flow_id, input, options, flow_ref=flow_ref)

    def stop_flow(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        self._ops.stop(flow_id, options)

    def time_travel(self, flow_id: str, options: TimeTravelOptions) -> str:
        """Create a new run of the flow from a point of its history; returns the new run id (the
        flow id is unchanged). The old run, if it still runs, ends TERMINATED; it stays readable
        as `<flow_id>$<run_id>`. FlowNotFoundError for no such flow, ValueError for selectors
        that do not fit `options.type`, TimeTravelPointError (a DexServiceError) for a point the
        history lacks."""
        return self._ops.time_travel(flow_id, options)

    def invoke_rpc(self, rpc_method: Any, flow_id: str, input: Any = None, *, run_id: str = "",
                   options: RPCInvokeOptions | None = None) -> Any:
        """Invoke an @rpc method of the registered flow on a running flow; returns its output.
        Its effects commit atomically with it; a handler that raises commits nothing
        (WorkerInvocationError)."""
        output = self.engine.invoke_rpc(rpc_method, flow_id, input, options)
        self._ops.answer()  # its output may have read what ASYNC steps left open
        return output

    def skip_timer(self, flow_id: str, step_execution_id: StepExecutionId, timer_id: TimerId) -> None:
        """Make a pending timer of a waiting step execution ready now."""
        self._ops.skip_timer(flow_id, step_execution_id, timer_id)

    def list_stream_messages(self, flow_id: str, stream: Stream[Any], page_size: int,
                             before_page_token: str = "") -> StreamMessagesPage[Any]:
        """Newest first, non-blocking. Pass `next_page_token` back to read older messages."""
        return self._ops.list_messages(flow_id, stream, page_size, before_page_token)

    def write_stream(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        """Write one message as a client. Rejected (ValueMappingError) when it can never fit."""
        return self._ops.write_message(flow_id, stream, source, value)

    def wait_for_flow(self, flow_id: str, timeout: timedelta | None = None) -> FlowResult:
        deadline = self._ops.deadline(timeout, "wait_for_flow")
        self._ops.flow(flow_id)
        self.engine.drive([flow_id], until=lambda: not self._ops.running(flow_id), deadline=deadline)
        return self._ops.final(flow_id)

    def read_stream(self, flow_id: str, stream: Stream[Any], resume_token: str = "",
                    timeout: timedelta | None = None) -> StreamMessage[Any]:
        """The next retained message after `resume_token` (pass back the last message's token;
        "", or a token whose message has been trimmed since, gives the oldest retained one).
        Drives the flow until one is written; LongPollTimeoutError when `timeout` passes first,
        or at once when none is there and the flow is not running (it ended, or there is no
        such flow: messages a client wrote to that id are still read)."""
        deadline = self._ops.deadline(timeout, "read_stream")
        msg = self._ops.next_message(flow_id, stream, resume_token)
        if msg is None and self._ops.running(flow_id):
            def written() -> bool:
                return self._ops.next_message(flow_id, stream, resume_token) is not None

            self.engine.drive([flow_id], until=lambda: written() or not self._ops.running(flow_id),
                              deadline=deadline, poll=0.1)
            msg = self._ops.next_message(flow_id, stream, resume_token)
        if msg is None:
            raise self._ops.no_message(flow_id, stream, resume_token)
        return msg

    def search_flows(self, query: str, page_size: int, next_page_token: str = "", *,
                     include_continued_as_new: bool = False) -> SearchFlowsPage:
        """One page of the flows a visibility query matches (dexcli.store.query has the language);
        pass `next_page_token` back for the next page. The earlier runs of a continue-as-new
        chain are left out unless `include_continued_as_new`."""
        return self._ops.search(query, page_size, next_page_token, include_continued_as_new)

    def update_flow_config(self, flow_id: str, config: FlowConfig) -> None:
        """Merge `config`'s fields that are not None into the running flow's FlowConfig
        (dexcli.engine.flow_config: what each does in dex; worker_target is refused).
        FlowNotActiveOrNotFoundError if the flow is missing or closed."""
        self._ops.update_config(flow_id, config)

    def trigger_continue_as_new(self, flow_id: str) -> None:
        """Roll the running flow over into a new run of the same flow id now: its open steps,
        attributes, pending messages and outputs carry over, its history starts again
        (dexcli.engine.transitions.continuing). FlowNotActiveOrNotFoundError if the flow is
        missing or closed."""
        self._ops.continue_as_new(flow_id)

    def wait_for_attribute_match(self, flow_id: str, attribute: Any, *args: Any, **kwargs: Any) -> Any:
        """`(flow_id, attribute, [instance,] match, options)`: drive the flow until the attribute's
        committed value satisfies `match`, and return that value. RequestTimeoutError when
        `options.request_timeout` passes first; FlowNotActiveOrNotFoundError if the flow is not
        running or ends first."""
        match, deadline = self._ops.attribute_wait(flow_id, attribute, args, kwargs)
        if not match.held():
            self._drive_until(flow_id, match.held, deadline)
        if not match.found:
            raise self._ops.wait_over(flow_id, f"attribute {attribute.name} to match", deadline)
        self._ops.answer()
        return match.value

    def wait_for_step_completion(self, flow_id: str, step_execution_id: StepExecutionId,
                                 options: WaitForStepCompletionOptions) -> None:
        """Drive the flow until that step execution has ended."""
        ended, deadline = self._ops.step_wait(flow_id, step_execution_id, options)
        if not ended():
            self._drive_until(flow_id, ended, deadline)
        if not ended():
            raise self._ops.wait_over(flow_id, f"step execution {step_execution_id} to complete", deadline)
        self._ops.answer()

    def _drive_until(self, flow_id: str, done: Callable[[], bool], deadline: float | None) -> None:
        # on real time, look every 0.1 s for what other processes commit; in virtual time only
        # this engine commits, and each of its changes is looked at anyway
        poll = 0.1 if self.engine.clock.follow_real else None
        self.engine.drive([flow_id], until=lambda: done() or not self._ops.running(flow_id), deadline=deadline,
                          poll=poll)


class AsyncClient(_Closing):
    """Asynchronous client for code already running on the engine's event loop: the Client's
    methods as coroutines. Starts made together (e.g. under asyncio.gather) share one commit."""

    def __init__(self, registry: Registry | list[Flow[Any]] | None = None, *, db: str | Path | None = None,
                 clock: Clock | None = None, engine: Engine | None = None) -> None:
        self.engine = _engine(registry, db, clock, engine, allow_async_handlers=True)
        self._owns_store = engine is None
        self._ops = _Ops(self.engine)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, exception_type: type[BaseException] | None, exception: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the database this client opened (db=...). Idempotent."""
        self._close()

    @property
    def store(self) -> Store:
        return self.engine.store

    def result(self, flow_id: str) -> FlowResult:
        return self._ops.result(flow_id)

    async def describe_flow(self, flow_id: str) -> FlowInfo:
        """As Client.describe_flow."""
        return self._ops.describe(flow_id)

    async def health_check(self) -> bool:
        """As Client.health_check."""
        self._ops.health(self._closed)
        return True

    async def start_flow(self, flow: Flow[Any], flow_id: str | None, input: Any,
                         options: StartFlowOptions | None = None, *, flow_ref: str | None = None) -> str:
        return await self.engine.start_flow_async(flow, flow_id, input, flow_ref=flow_ref, options=options)

    async def stop_flow(self, flow_id: str, options: StopFlowOptions | None = None) -> None:
        self._ops.stop(flow_id, options)

    async def time_travel(self, flow_id: str, options: TimeTravelOptions) -> str:
        """As Client.time_travel."""
        return self._ops.time_travel(flow_id, options)

    async def invoke_rpc(self, rpc_method: Any, flow_id: str, input: Any = None, *, run_id: str = "",
                         options: RPCInvokeOptions | None = None) -> Any:
        output = await self.engine.invoke_rpc_async(rpc_method, flow_id, input, options)
        self._ops.answer()  # as Client.invoke_rpc
        return output

    async def skip_timer(self, flow_id: str, step_execution_id: StepExecutionId, timer_id: TimerId) -> None:
        self._ops.skip_timer(flow_id, step_execution_id, timer_id)

    async def list_stream_messages(self, flow_id: str, stream: Stream[Any], page_size: int,
                                   before_page_token: str = "") -> StreamMessagesPage[Any]:
        return self._ops.list_messages(flow_id, stream, page_size, before_page_token)

    async def write_stream(self, flow_id: str, stream: Stream[Any], source: str, value: Any) -> str:
        return self._ops.write_message(flow_id, stream, source, value)

    async def wait_for_flow(self, flow_id: str, timeout: timedelta | None = None) -> FlowResult:
        deadline = self._ops.deadline(timeout, "wait_for_flow")
        self._ops.flow(flow_id)
        await self.engine.drive_async([flow_id], until=lambda: not self._ops.running(flow_id), deadline=deadline)
        return self._ops.final(flow_id)

    async def read_stream(self, flow_id: str, stream: Stream[Any], resume_token: str = "",
                          timeout: timedelta | None = None) -> StreamMessage[Any]:
        """Long-polls on the engine's clock until a message after `resume_token` arrives, the
        flow ends without one, or `timeout` passes (then LongPollTimeoutError)."""
        deadline = self._ops.deadline(timeout, "read_stream")
        msg = self._ops.next_message(flow_id, stream, resume_token)
        if msg is None and self._ops.running(flow_id):
            def written() -> bool:
                return self._ops.next_message(flow_id, stream, resume_token) is not None

            await self._drive_until(flow_id, written, deadline)
            msg = self._ops.next_message(flow_id, stream, resume_token)
        if msg is None:
            raise self._ops.no_message(flow_id, stream, resume_token)
        return msg

    async def search_flows(self, query: str, page_size: int, next_page_token: str = "", *,
                           include_continued_as_new: bool = False) -> SearchFlowsPage:
        return self._ops.search(query, page_size, next_page_token, include_continued_as_new)

    async def update_flow_config(self, flow_id: str, config: FlowConfig) -> None:
        self._ops.update_config(flow_id, config)

    async def trigger_continue_as_new(self, flow_id: str) -> None:
        self._ops.continue_as_new(flow_id)

    async def wait_for_attribute_match(self, flow_id: str, attribute: Any, *args: Any, **kwargs: Any) -> Any:
        """As Client.wait_for_attribute_match, polling while the engine runs on this loop."""
        match, deadline = self._ops.attribute_wait(flow_id, attribute, args, kwargs)
        if not match.held():
            await self._drive_until(flow_id, match.held, deadline)
        if not match.found:
            raise self._ops.wait_over(flow_id, f"attribute {attribute.name} to match", deadline)
        self._ops.answer()
        return match.value

    async def wait_for_step_completion(self, flow_id: str, step_execution_id: StepExecutionId,
                                       options: WaitForStepCompletionOptions) -> None:
        ended, deadline = self._ops.step_wait(flow_id, step_execution_id, options)
        if not ended():
            await self._drive_until(flow_id, ended, deadline)
        if not ended():
            raise self._ops.wait_over(flow_id, f"step execution {step_execution_id} to complete", deadline)
        self._ops.answer()

    async def _drive_until(self, flow_id: str, done: Callable[[], bool], deadline: float | None) -> None:
        poll = 0.1 if self.engine.clock.follow_real else None  # as Client._drive_until
        await self.engine.drive_async([flow_id], until=lambda: done() or not self._ops.running(flow_id),
                                      deadline=deadline, poll=poll)


# The official Client's operations: a DexServiceError out of one names it and its flow id
# (`operation`, `flow_id`), as the official SDK's errors do.
OPERATIONS = ("describe_flow", "health_check", "start_flow", "stop_flow", "time_travel", "invoke_rpc",
              "skip_timer", "list_stream_messages", "write_stream", "wait_for_flow", "read_stream", "search_flows",
              "update_flow_config", "trigger_continue_as_new", "wait_for_attribute_match",
              "wait_for_step_completion")
C = TypeVar("C", bound=type)


def _locating(cls: C) -> C:
    for name in OPERATIONS:
        setattr(cls, name, _located(name, getattr(cls, name)))
    return cls


def _located(operation: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    params = list(inspect.signature(fn).parameters)
    at = params.index("flow_id") - 1 if "flow_id" in params else None  # among the args after self

    def flow_id_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        fid = kwargs.get("flow_id") if at is None or len(args) <= at else args[at]
        return fid if isinstance(fid, str) else None

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def call_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return await fn(self, *args, **kwargs)
            except DexServiceError as exc:
                exc.located(operation, flow_id_of(args, kwargs))
                raise

        return call_async

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except DexServiceError as exc:
            exc.located(operation, flow_id_of(args, kwargs))
            raise

    return call


_locating(Client)
_locating(AsyncClient)
