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
from datetime import UTC, datetime
from typing import Any, Protocol

from dexcli.engine.deadlines import earliest_deadline
from dexcli.engine.faults import Faults, InjectedError
from dexcli.engine.transitions import AttemptKey, Leased, Outputs
from dexcli.sdk.codec import decode, encode
from dexcli.sdk.context import RecoveryErrorInfo, StepOutput
from dexcli.sdk.decisions import OMITTED
from dexcli.sdk.errors import AttemptFencedError, FlowCodeError, InvalidStepResultError, NotSupportedYetError
from dexcli.sdk.stream import MAX_MESSAGE_BYTES, Stream, message_size


class AttemptHost(Protocol):
    """What an attempt needs of the engine that runs it."""

    faults: Faults

    def now(self) -> float: ...

    def outputs_for(self, run: AttemptRun) -> Outputs: ...


class AttemptRun:
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
        self.task: asyncio.Task[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None  # the watchdog at the next deadline
        self.timed_out: tuple[float, str] | None = None  # (deadline, kind) once it fired
        self.heartbeats = 0
        self.stream_writes = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.flow_id, self.seid)

    def where(self, extra: str = "") -> str:
        return f"{self.seid} attempt {self.attempt}{extra}"

    def next_deadline(self) -> tuple[float, str]:
        return earliest_deadline(self.attempt_deadline, self.last_heartbeat + self.opts.heartbeat_timeout,
                                 self.total_deadline)

    def fence(self, reason: str) -> None:
        if self.fenced is None:
            self.fenced = reason

    def ended(self) -> str | None:
        """Why this attempt may no longer act, or None. A cancellation the handler swallowed
        (asyncio.wait_for in 3.11 can) still ends it: the task keeps the request pending."""
        if self.fenced is None and self.task is not None and self.task.cancelling():
            self.fence("cancelled")
        return self.fenced

    def _refuse(self, what: str) -> AttemptFencedError:
        return AttemptFencedError(
            f"{self.seid} attempt {self.attempt} has ended ({self.fenced}); its {what} is refused")

    # --- outputs from the handler ---------------------------------------------------------
    def heartbeat(self, value: Any = OMITTED) -> None:
        if self.ended():
            raise self._refuse("heartbeat")
        now = self.host.now()
        self.last_heartbeat = now
        out = self.host.outputs_for(self)
        out.last_time = now
        out.heartbeats += 1
        out.checkpoint = (False, None) if value is OMITTED else (True, encode(value))

    def stream_write(self, stream: Stream[Any], value: Any) -> None:
        if self.ended():
            raise self._refuse("Stream write")
        declared = self.definition.streams.get(stream.name)
        if declared is None:
            raise ValueError(f"stream {stream.name!r} is not in {self.definition.flow_type}'s PersistenceSchema")
        text = encode(value)
        now = self.host.now()
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
        self.attempt: int = run.attempt
        first = step.first_attempt_at or run.started
        self.first_attempt_at = datetime.fromtimestamp(int(first), tz=UTC)
        self._has_hb = step.has_heartbeat_value
        self._hb = step.heartbeat_value
        rec = step.recovery_error
        self._recovery = None if rec is None else RecoveryErrorInfo(**json.loads(rec))

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
        return False

    def has_timer_fired(self, index: int | None = None) -> bool:
        raise NotSupportedYetError("Timers (WaitFor) are defined but dex does not run them yet")

    def record_event(self, name: str, value: Any) -> None:
        raise NotSupportedYetError("record_event is not supported by dex yet")


class SyncContext(_Context):
    _dex_public_name = "Context"  # how an AttributeError names it (dexcli.engine.user_code)

    def _dex_stream_write(self, stream: Stream[Any], value: Any) -> StepOutput:
        if self._run.spec.handler_kind == "sync":
            # Dex would drop it silently: the frame must be yielded, which a plain function cannot.
            raise FlowCodeError(
                f"{self._run.spec.step_type}: {stream.name}.write(...) in a sync step returns a frame that must "
                "be yielded; make execute a generator (`yield stream.write(context, value)`) or async")
        return StepOutput("stream", value, stream)


class AsyncStepContext(_Context):
    _dex_public_name = "AsyncContext"

    async def heartbeat(self, value: Any = OMITTED) -> None:
        self._run.heartbeat(value)

    def _dex_stream_write(self, stream: Stream[Any], value: Any) -> None:
        self._run.stream_write(stream, value)


_DONE = object()


def _advance(gen: Any) -> tuple[Any, Any]:
    try:
        return (None, next(gen))
    except StopIteration as stop:
        return (_DONE, stop.value)


async def _inline(fn: Any, *args: Any) -> Any:
    return fn(*args)


async def invoke(run: AttemptRun, value: Any) -> Any:
    """Run the handler in its form and return what it returned."""
    spec = run.spec
    faults = run.host.faults
    if spec.has_wait_for:
        raise NotSupportedYetError(f"{spec.step_type} defines wait_for; WaitFor is defined but dex does not run it yet")
    if faults.should_fail(spec.step_type, run.attempt):
        raise InjectedError(f"injected transient error (--fail) in attempt {run.attempt}")
    if faults.should_stall(spec.step_type, run.attempt):
        await asyncio.Event().wait()  # a stuck worker: no heartbeat, no progress
    if spec.handler_kind == "async":
        return await spec.instance.execute(AsyncStepContext(run), value)
    # a plain asyncio loop (no handler threads): run inline
    run_in_thread = getattr(asyncio.get_running_loop(), "run_in_thread", _inline)
    if spec.handler_kind == "sync":
        return await run_in_thread(spec.instance.execute, SyncContext(run), value)
    return await _drive_generator(run, spec.instance.execute(SyncContext(run), value), run_in_thread)


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
