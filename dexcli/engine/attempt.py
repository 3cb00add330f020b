"""One attempt of one step execution: its context, its deadlines, its outputs.

The attempt keeps its heartbeat time in memory (the watchdog reads it) and hands its
heartbeats and Stream messages to its host (the engine) for the next group commit. Once
fenced — timed out, cancelled, lease lost or flow closed — every later heartbeat, Stream
write and decision is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import json.scanner
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from dexcli.engine import handler_state as hs
from dexcli.engine.attributes import AttributeView
from dexcli.engine.deadlines import earliest_deadline
from dexcli.engine.faults import Faults, InjectedError
from dexcli.engine.subflows import flow_result
from dexcli.engine.transitions import AttemptKey, Leased, Outputs
from dexcli.engine.transitions.waiting import Effects
from dexcli.sdk.channels import physical_name
from dexcli.sdk.codec import decode, encode, from_jsonable
from dexcli.sdk.context import RecoveryErrorInfo, StepOutput
from dexcli.sdk.errors import AttemptFencedError, FlowCodeError, InvalidStepResultError
from dexcli.sdk.omitted import OMITTED
from dexcli.sdk.stream import MAX_MESSAGE_BYTES, AsyncBufferedTextStream, BufferedTextStream, Stream, message_size
from dexcli.store import Method

# Why an attempt cancelled with no reason given has ended: this process is stopping (its loop
# is torn down). Every other cancellation fences the attempt with its reason first.
STOPPING = "cancelled"


@dataclass(frozen=True, slots=True)
class AttemptHost:
    """What an attempt needs of the engine that runs it."""

    faults: Faults
    now: Callable[[str], float]  # a flow's clock
    outputs_for: Callable[[AttemptRun], Outputs]  # its outputs waiting for the next group commit


class Driver(Protocol):
    """What runs an attempt: its asyncio task, or a chain of callbacks (dexcli.engine.sync_attempt)."""

    def cancel(self, msg: Any | None = None) -> bool: ...

    def done(self) -> bool: ...

    def cancelling(self) -> int: ...


class Timer(Protocol):
    """An armed watchdog: an asyncio timer, or an entry of dexcli.engine.watch."""

    def cancel(self) -> None: ...


class AttemptRun:
    # slots: one is built per attempt, and the watchdog and the outputs read its fields often
    __slots__ = ("host", "leased", "step", "spec", "definition", "opts", "flow_id", "seid", "attempt", "attempt_key",
                 "started", "last_heartbeat", "attempt_deadline", "total_deadline", "fenced", "driver", "loop",
                 "timer", "timed_out", "heartbeats", "stream_writes", "effects", "handed_on", "began")

    def __init__(self, host: AttemptHost, leased: Leased, owner: str, now: float) -> None:
        self.host = host
        self.leased = leased
        self.step = leased.step  # as leased: RUNNING, attempt already incremented
        self.spec = leased.spec
        self.definition = leased.definition
        self.opts = leased.options
        self.flow_id = self.step.flow_id
        self.seid = self.step.step_execution_id
        self.attempt = self.step.attempt
        self.attempt_key = AttemptKey(self.flow_id, self.seid, self.attempt, owner)
        self.started = now
        self.last_heartbeat = now
        self.attempt_deadline = now + self.opts.method_timeout
        self.total_deadline = self.step.total_deadline
        self.fenced: str | None = None
        self.driver: Driver | None = None  # set once it starts
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop it runs on
        self.timer: Timer | None = None  # the watchdog at the next deadline
        self.timed_out: tuple[float, str] | None = None  # (deadline, kind) once it fired
        self.heartbeats = 0
        self.stream_writes = 0
        self.effects = Effects()  # publishes, locals, events: committed with the result
        self.handed_on = False  # its commit leased every step it created (see Endings._decision_unit)
        self.began = False  # it started: its task ran its first step, or SyncAttempt._start ran

    @property
    def key(self) -> tuple[str, str]:
        return (self.flow_id, self.seid)

    @property
    def method(self) -> Method:
        return self.step.method

    def where(self, extra: str = "") -> str:
        return f"{self.seid} attempt {self.attempt}{extra}"

    def next_deadline(self) -> tuple[float, str]:
        return earliest_deadline(self.attempt_deadline, self.last_heartbeat + self.opts.heartbeat_timeout,
                                 self.total_deadline)

    def disarm(self) -> None:
        """Its watchdog off (it ended, or the timer is about to be set again)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def fence(self, reason: str) -> None:
        if self.fenced is None:
            self.fenced = reason

    def cancel(self) -> None:
        """Stop it where it waits (its handler, its commit); the caller fenced it (or it timed out)."""
        if self.driver is not None and not self.driver.done():
            self.driver.cancel()

    def done(self) -> bool:
        """Whether it has ended here (its task or its callbacks are over)."""
        return self.driver is not None and self.driver.done()

    def ended(self) -> str | None:
        """Why this attempt may no longer act, or None. A cancellation the handler swallowed
        (asyncio.wait_for in 3.11 can) still ends it: the task keeps the request pending."""
        if self.fenced is None and self.driver is not None and self.driver.cancelling():
            self.fence(STOPPING)
        return self.fenced

    def _refuse(self, what: str) -> AttemptFencedError:
        return AttemptFencedError(
            f"{self.seid} attempt {self.attempt} has ended ({self.fenced}); its {what} is refused")

    # --- outputs from the handler ---------------------------------------------------------
    def heartbeat(self, value: Any = OMITTED) -> None:
        if self.ended():
            raise self._refuse("heartbeat")
        now = self.host.now(self.flow_id)
        self.last_heartbeat = now
        out = self.host.outputs_for(self)
        out.last_time = now
        out.heartbeats += 1
        out.checkpoint = (False, None) if value is OMITTED else (True, encode(value))

    def declared_stream(self, stream: Stream[Any]) -> Stream[Any]:
        declared = self.definition.streams.get(stream.name)
        if declared is None:
            raise ValueError(f"stream {stream.name!r} is not in {self.definition.flow_type}'s PersistenceSchema")
        return declared

    def stream_write(self, stream: Stream[Any], value: Any) -> None:
        if self.ended():
            raise self._refuse("Stream write")
        declared = self.declared_stream(stream)
        text = encode(value)
        now = self.host.now(self.flow_id)
        self.last_heartbeat = now  # a Stream message is an implicit heartbeat
        out = self.host.outputs_for(self)
        out.last_time = now
        size = message_size(text, self.flow_id, f"#{self.seid}")
        if size > MAX_MESSAGE_BYTES:
            return  # best effort: dropped, the step does not fail
        out.streams.append((declared, text, now, size))


class _Context:
    """What every handler form is given. Implements dexcli.Context."""

    def __init__(self, run: AttemptRun) -> None:
        self._run = run
        step = run.step
        self.flow_id: str = run.flow_id
        self.run_id: str = run.leased.run_id
        self.step_execution_id: str = run.seid
        self.from_step_execution_id: str = step.from_step_execution_id
        self.attempt: int = step.method_attempt
        self._first = step.first_attempt_at or run.started  # a datetime only if asked (most never do)
        self._first_at: datetime | None = None
        self._has_hb = step.has_heartbeat_value
        self._hb = step.heartbeat_value
        rec = step.recovery_error
        self._recovery = None if rec is None else RecoveryErrorInfo(**json.loads(rec))
        self._results = json.loads(step.condition_results) if step.condition_results else None
        self._locals: dict[str, str] = json.loads(step.locals) if step.locals else {}
        self._attrs = AttributeView(run.definition, run.leased.attributes, run.opts.loads)
        run.effects.attributes = self._attrs.writes

    @property
    def first_attempt_at(self) -> datetime:
        if self._first_at is None:
            self._first_at = datetime.fromtimestamp(int(self._first), tz=UTC)
        return self._first_at

    @first_attempt_at.setter
    def first_attempt_at(self, value: datetime) -> None:
        self._first_at = value

    @property
    def recovery_error(self) -> RecoveryErrorInfo | None:
        return self._recovery

    def has_last_heartbeat_value(self) -> bool:
        return self._has_hb

    def get_last_heartbeat_value(self, value_type: Any = Any) -> Any:
        return decode(self._hb, value_type) if self._has_hb and self._hb is not None else None

    def is_cancellation_requested(self) -> bool:
        return self._run.ended() is not None

    def wait_for_method_failed(self) -> bool:
        return self._run.step.wait_for_failed

    def has_timer_fired(self, index: int | None = None) -> bool:
        """Whether any timer (or the index-th, 0-based) of this execution's wait had fired or
        was skipped when the wait completed."""
        fired = self._results["timersFired"] if self._results else []
        if index is None:
            return any(fired)
        return 0 <= index < len(fired) and bool(fired[index])

    def _sub_flows(self, index: int) -> dict[str, Any]:
        """The index-th SubFlow condition of the completed wait (SubFlow.get_condition_results)."""
        if self._run.method is not Method.EXECUTE:
            raise ValueError("SubFlow results are available only during execute")
        conds = [c for c in self._results["conditions"] if c["kind"] == "subflow"] if self._results else []
        if not isinstance(index, int) or not 0 <= index < len(conds):
            raise ValueError(f"SubFlow result index is unavailable: {index}")
        found: dict[str, Any] = conds[index]
        return found

    def _sub_flow_result(self, index: int) -> Any:
        return flow_result(self._sub_flows(index)["result"])

    def _sub_flow_id(self, index: int) -> str:
        return str(self._sub_flows(index)["flowId"])

    def _dex_now(self) -> float:
        return self._run.host.now(self._run.flow_id)

    def record_event(self, name: str, value: Any) -> None:
        if not name:
            raise ValueError("record_event needs a name")
        self._run.effects.events.append({"name": name, "value": json.loads(encode(value))})

    def set_step_execution_local(self, key: str, value: Any) -> None:
        if not key:
            raise ValueError("a step-execution local needs a key")
        self._locals[key] = encode(value)
        self._run.effects.locals = dict(self._locals)

    def get_step_execution_local(self, key: str, value_type: Any = Any) -> Any:
        text = self._locals.get(key)
        return None if text is None else decode(text, value_type)

    # --- the hooks Attribute and Channel definitions call ---------------------------------
    def _get_attribute(self, attribute: Any, instance: str | None) -> Any:
        return self._attrs.get(attribute, instance)

    def _set_attribute(self, attribute: Any, instance: str | None, value: Any) -> None:
        if self._run.ended():
            raise self._run._refuse("Attribute write")
        self._attrs.set(attribute, instance, value)

    def _delete_attribute(self, attribute: Any, instance: str | None) -> None:
        if self._run.ended():
            raise self._run._refuse("Attribute write")
        self._attrs.delete(attribute, instance)

    def _attribute_map_keys(self, attribute: Any) -> list[str]:
        return self._attrs.map_keys(attribute)

    def _declared(self, channel: Any) -> Any:
        definition = self._run.definition
        return hs.declared(definition.channels, channel, definition.flow_type, "channel")

    def _publish_channel(self, channel: Any, instance: str | None, value: Any) -> None:
        if self._run.ended():
            raise self._run._refuse("Channel publish")
        hs.publish(self._run.effects.publishes, self._declared(channel), instance, value)

    def _channel_size(self, channel: Any, instance: str | None) -> int:
        declared = self._declared(channel)
        return self._run.leased.queue_counts.get(physical_name(declared.name, instance), 0)

    def _channel_map_keys(self, channel: Any) -> list[str]:
        return hs.map_instances(self._run.leased.queue_counts, self._declared(channel).name)

    def _channel_results(self, channel: Any, instance: str | None) -> list[Any]:
        declared = self._declared(channel)
        queue = physical_name(declared.name, instance)
        conditions = self._results["conditions"] if self._results else []
        return [from_jsonable(v, declared.value_type) for c in conditions
                if c.get("queue") == queue for v in c.get("values", ())]

    def _pending_channel_messages(self, channel: Any, instance: str | None) -> list[Any]:
        raise FlowCodeError("Channel.pending_messages is for RPC handlers; a step reads what its wait "
                            "consumed with Channel.results(context)")

    def _delete_channel_message(self, channel: Any, instance: str | None, message_id: str) -> None:
        raise FlowCodeError("Channel.delete is for RPC handlers (with @rpc(load_channels=...))")


class SyncContext(_Context):
    _dex_public_name = "Context"  # how an AttributeError names it (dexcli.engine.user_code)

    def _dex_stream_write(self, stream: Stream[Any], value: Any) -> StepOutput:
        self._refuse_unyielded(f"{stream.name}.write(...)", "`yield stream.write(context, value)`")
        return StepOutput("stream", value, stream)

    def _dex_buffered_text(self, stream: Stream[str], flush_interval: Any, max_buffered_bytes: int
                           ) -> BufferedTextStream:
        self._refuse_unyielded(f"{stream.name}.buffered_text(...)", "`yield from writer.write(chunk)`")
        self._run.declared_stream(stream)
        return BufferedTextStream(stream, self, flush_interval, max_buffered_bytes)

    def _refuse_unyielded(self, call: str, fix: str) -> None:
        if self._run.spec.handler_kind == "sync":
            # Dex would drop it silently: the frame must be yielded, which a plain function cannot.
            raise FlowCodeError(f"{self._run.spec.step_type}: {call} in a sync step gives frames that must be "
                                f"yielded; make execute a generator ({fix}) or async")


class AsyncStepContext(_Context):
    _dex_public_name = "AsyncContext"

    def __init__(self, run: AttemptRun) -> None:
        super().__init__(run)
        self._buffered: list[AsyncBufferedTextStream] = []

    async def heartbeat(self, value: Any = OMITTED) -> None:
        self._run.heartbeat(value)

    def _dex_stream_write(self, stream: Stream[Any], value: Any) -> None:
        self._run.stream_write(stream, value)

    def _dex_buffered_text(self, stream: Stream[str], flush_interval: Any, max_buffered_bytes: int
                           ) -> AsyncBufferedTextStream:
        if self._run.ended():
            raise self._run._refuse("Stream write")
        self._run.declared_stream(stream)
        writer = AsyncBufferedTextStream(stream, self, flush_interval, max_buffered_bytes)
        self._buffered.append(writer)
        return writer

    def end_buffered(self, cancelled: bool) -> None:
        """The handler has ended: its buffered writers write what they hold, before its result
        commits (or drop it, when the attempt was cancelled)."""
        for writer in self._buffered:
            if cancelled:
                writer._dex_discard()
            else:
                writer._dex_finish()


_DONE = object()
_scan: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(cast(Any, json.JSONDecoder()))


def step_input(run: AttemptRun) -> Any:
    """The attempt's input, decoded as its step's type. dex stores it as compact JSON, which
    the decoder's scanner reads at a third of `json.loads`' cost (that call checks the text's
    type, skips whitespace both sides and looks for extra data); any other text goes through
    `json.loads`, and gets its rules and errors."""
    text = run.step.input
    if not text:
        return from_jsonable(None, run.spec.input_type)
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        value = json.loads(text)
    return from_jsonable(value, run.spec.input_type)


def _advance(gen: Any) -> tuple[Any, Any]:
    try:
        return (None, next(gen))
    except StopIteration as stop:
        return (_DONE, stop.value)


async def _inline(fn: Any, *args: Any) -> Any:
    return fn(*args)


def stalls(run: AttemptRun) -> bool:
    """The injected faults of an attempt about to call its handler: `--fail` raises here;
    True for `--stall` (a stuck worker: no heartbeat, no progress, until the watchdog)."""
    faults = run.host.faults
    if faults.fail is None and faults.stall is None:
        return False  # nothing injected (what attempts reached is only told of an injected one)
    if faults.should_fail(run.spec.step_type, run.attempt):
        raise InjectedError(f"injected transient error (--fail) in attempt {run.attempt}")
    return faults.should_stall(run.spec.step_type, run.attempt)


async def invoke(run: AttemptRun, value: Any) -> Any:
    """Run the handler in its form and return what it returned."""
    spec = run.spec
    if stalls(run):
        await asyncio.Event().wait()
    waiting = run.method is Method.WAIT_FOR
    kind = spec.wait_kind if waiting else spec.handler_kind
    handler = spec.instance.wait_for if waiting else spec.instance.execute
    if kind == "async":
        return await _invoke_async(handler, AsyncStepContext(run), value)
    # a plain asyncio loop (no handler threads): run inline
    run_in_thread = getattr(asyncio.get_running_loop(), "run_in_thread", _inline)
    if kind == "sync":
        return await run_in_thread(handler, SyncContext(run), value)
    return await _drive_generator(run, handler(SyncContext(run), value), run_in_thread)


async def _invoke_async(handler: Any, context: AsyncStepContext, value: Any) -> Any:
    try:
        result = await handler(context, value)
    except asyncio.CancelledError:
        context.end_buffered(cancelled=True)
        raise
    except BaseException:
        with contextlib.suppress(Exception, AttemptFencedError):  # the handler's own error is the one to report
            context.end_buffered(cancelled=False)
        raise
    context.end_buffered(cancelled=False)
    return result


async def _drive_generator(run: AttemptRun, gen: Any, run_in_thread: Any) -> Any:
    """A sync generator handler: each step of it in a thread; its frames applied here."""
    try:
        while True:
            done, frame = await run_in_thread(_advance, gen)
            if done is _DONE:
                return frame
            if not isinstance(frame, StepOutput):
                raise InvalidStepResultError(
                    f"{run.spec.step_type} yielded {type(frame).__name__}; a generator step yields "
                    "heartbeat(...) or stream.write(context, ...) frames and returns its decision")
            if frame.kind == "heartbeat":
                run.heartbeat(frame.value)
            else:
                run.stream_write(frame.stream, frame.value)
    finally:
        with contextlib.suppress(ValueError):  # still running in its thread after a timeout: fenced
            gen.close()
