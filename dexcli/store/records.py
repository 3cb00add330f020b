"""What the store hands out: frozen records, one per table row, and the enums of their states.

Field names are the column names (schema.sql). Values stay as stored: times are epoch seconds
on their flow's clock (real time plus the flow's offset), JSON columns are text (the engine
and the views decode what they use).
The enums' values are what the database holds; `dex inspect --json` shows them as they are.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any


class FlowState(enum.Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TERMINATED = "TERMINATED"


class StepState(enum.Enum):
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    BACKOFF = "BACKOFF"  # failed, waiting for its next attempt
    WAITING = "WAITING"  # its wait_for returned a Wait that is not ready yet
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"

    @property
    def is_open(self) -> bool:
        return self in _OPEN_STEPS


_OPEN_STEPS = frozenset({StepState.QUEUED, StepState.RUNNING, StepState.BACKOFF, StepState.WAITING})


class Method(enum.Enum):
    """Which method of a step execution its attempts run."""

    WAIT_FOR = "WAIT_FOR"
    EXECUTE = "EXECUTE"


class AttemptOutcome(enum.Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"  # the handler raised, or its result was invalid
    TIMED_OUT = "TIMED_OUT"  # this process saw a deadline pass
    LOST = "LOST"  # another process declared it lost at a deadline (its owner died)
    CANCELED = "CANCELED"  # the flow closed while it ran
    INTERRUPTED = "INTERRUPTED"  # its process stopped cleanly (Ctrl-C, SIGTERM, a closed pipe): not a failure


@dataclass(frozen=True, slots=True)
class FlowRecord:
    flow_id: str
    run_id: str
    flow_type: str
    flow_ref: str | None
    status: FlowState
    input: str | None
    request_id: str | None
    start_time: float
    close_time: float | None
    error_type: str | None
    error_message: str | None
    graceful: bool
    completions: str  # JSON list of {"stepType", "stepExecutionId", "output"}
    clock_offset: float = 0.0  # seconds this flow's clock was skipped ahead
    timeout: float | None = None  # StartFlowOptions.timeout in seconds; None: no flow timeout
    timeout_policy: str | None = None  # FAIL, CANCEL or HANDLER (resolved at start)
    timeout_at: float | None = None  # when the timeout fires; None once it fired (or without one)
    timeout_handler_options: str | None = None  # handle_timeout's ResolvedOptions JSON (HANDLER)
    start_delay: float | None = None  # seconds the start step waited to become eligible
    id_reuse_policy: str | None = None  # the IdReusePolicy name it was started with

    @property
    def is_running(self) -> bool:
        return self.status is FlowState.RUNNING


@dataclass(frozen=True, slots=True)
class StepRecord:
    flow_id: str
    step_execution_id: str
    step_type: str
    seq: int
    from_step_execution_id: str
    input: str | None
    options: str  # ResolvedOptions JSON (dexcli.sdk.options)
    status: StepState
    attempt: int
    scheduled_at: float
    first_attempt_at: float | None
    next_attempt_at: float | None
    lease_owner: str | None
    attempt_started_at: float | None
    last_heartbeat_time: float | None
    heartbeat_deadline: float | None
    attempt_deadline: float | None
    total_deadline: float
    heartbeat_value: str | None
    has_heartbeat_value: bool
    recovery_error: str | None
    decision: str | None
    end_time: float | None
    method: Method = Method.EXECUTE
    method_base: int = 0  # attempts before this method's first: its attempt number is attempt - method_base
    wait_options: str | None = None  # the wait_for method's ResolvedOptions JSON
    wait: str | None = None  # the committed Wait (JSON)
    wait_started: float | None = None
    wait_ended: float | None = None
    condition_results: str | None = None  # what the completed wait selected and consumed (JSON)
    wait_for_failed: bool = False
    locals: str | None = None  # step-execution locals (JSON object)
    lock_wait: str | None = None  # the attribute lock key a queued step waits for

    @property
    def method_attempt(self) -> int:
        """The attempt number within the current method (what the handler's context shows)."""
        return self.attempt - self.method_base


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    flow_id: str
    step_execution_id: str
    attempt: int
    owner: str | None
    start_time: float
    end_time: float | None
    outcome: AttemptOutcome
    error_type: str | None
    detail: str | None
    heartbeats: int
    last_heartbeat: float | None
    stream_writes: int
    method: str = "EXECUTE"
    stack_trace: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    event_id: int  # per flow, from 1 (Store.history_of numbers them; the table id is database-wide)
    flow_id: str
    event_time: float
    type: str
    payload: str  # JSON object


@dataclass(frozen=True, slots=True)
class StreamRecord:
    id: int  # the resume token
    flow_type: str
    stream: str
    flow_id: str
    source: str
    value: str  # JSON
    created_time: float
    size: int


@dataclass(frozen=True, slots=True)
class Runnable:
    """A queued or backing-off step with what a claim needs of its flow."""

    step: StepRecord
    flow_status: FlowState
    run_id: str
    flow_type: str
    flow_ref: str | None
    clock_offset: float = 0.0  # the flow's: its times are real time plus this


@dataclass(frozen=True, slots=True)
class Schedule:
    """When this process next has something to do: `due`, the first time a queued step or a
    retry is runnable; `foreign`, the (owner, first deadline) of running attempts other
    processes hold."""

    due: float | None
    foreign: tuple[tuple[str | None, float | None], ...]


@dataclass(frozen=True, slots=True)
class Skipped:
    """What a time skip did: the flows whose clocks moved (with their new offsets), and those
    it left alone because a live process holds a lease of theirs (flow id -> that owner)."""

    moved: dict[str, float]
    held: dict[str, str]


def columns(record: type[Any]) -> str:
    """The SELECT list of a record, in field order."""
    return ", ".join(f.name for f in fields(record))


FLOW_COLUMNS = columns(FlowRecord)
STEP_COLUMNS = columns(StepRecord)
ATTEMPT_COLUMNS = columns(AttemptRecord)
HISTORY_COLUMNS = columns(HistoryRecord)
STREAM_COLUMNS = columns(StreamRecord)


def flow_record(row: tuple[Any, ...]) -> FlowRecord:
    values = list(row)
    values[4], values[11] = FlowState(values[4]), bool(values[11])
    return FlowRecord(*values)


def step_record(row: tuple[Any, ...]) -> StepRecord:
    values = list(row)
    values[7], values[19] = StepState(values[7]), bool(values[19])
    values[23], values[30] = Method(values[23]), bool(values[30])
    return StepRecord(*values)


def attempt_record(row: tuple[Any, ...]) -> AttemptRecord:
    values = list(row)
    values[6] = AttemptOutcome(values[6])
    return AttemptRecord(*values)


def history_record(row: tuple[Any, ...]) -> HistoryRecord:
    return HistoryRecord(*row)


def stream_record(row: tuple[Any, ...]) -> StreamRecord:
    return StreamRecord(*row)
