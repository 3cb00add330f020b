"""What the store hands out: frozen records, one per table row, and the enums of their states.

Field names are the column names (schema.sql). Values stay as stored: times are epoch seconds
on their flow's clock (real time plus the flow's offset), JSON columns are text (the engine
and the views decode what they use).
The enums' values are what the database holds; `dex inspect --json` shows them as they are.
A row dex cannot have written (a JSON column that does not parse, a state no dex has) is refused
as it is read, with a DamagedDatabaseError naming the file, the table and the row.
"""

from __future__ import annotations

import enum
import functools
import json
from dataclasses import MISSING, dataclass, fields
from typing import Any, TypeVar

from dexcli.store.errors import DamagedDatabaseError


class FlowState(enum.Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TERMINATED = "TERMINATED"
    CONTINUED_AS_NEW = "CONTINUED_AS_NEW"  # an earlier run of a chain (kept under `<flow_id>$<run_id>`)


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


_R = TypeVar("_R")


def quick_init(cls: type[_R]) -> type[_R]:
    """A frozen, slotted dataclass whose `__init__` sets each field through its slot directly.
    The generated one calls `object.__setattr__(self, name, value)` per field (a frozen class's
    only way in): ~6 µs for a StepRecord's 35 fields, made for every step created, read or
    changed; the slots' own setters take half that. Same parameters, defaults and result; the
    instances stay frozen (assignment still raises FrozenInstanceError)."""
    params, setters, body = [], {}, []
    for f in fields(cls):  # type: ignore[arg-type]
        if f.default_factory is not MISSING:  # not needed by the records it serves
            raise TypeError(f"{cls.__name__}.{f.name}: quick_init takes no default_factory")
        setters[f"_set_{f.name}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        params.append(f.name if f.default is MISSING else f"{f.name}=_default_{f.name}")
        if f.default is not MISSING:
            setters[f"_default_{f.name}"] = f.default
        body.append(f"        _set_{f.name}(self, {f.name})")
    src = (f"def make({', '.join(setters)}):\n    def __init__(self, {', '.join(params)}):\n"
           + "\n".join(body) + "\n    return __init__\n")
    scope: dict[str, Any] = {}
    exec(src, scope)  # the source is built above from the class's own field names
    init = scope["make"](**setters)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@quick_init
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
    parent_flow_id: str | None = None  # a SubFlow: the flow whose wait started it
    parent_step_execution_id: str | None = None  # ... and the step execution of that wait
    flow_config: str | None = None  # the run's FlowConfig as set, JSON in protojson keys; None: dex's defaults
    first_run_id: str | None = None  # the first run of its continue-as-new chain; None: this run is
    step_numbers: str | None = None  # JSON {stepType: n, "": all}: step executions earlier runs numbered
    retry_policy: str | None = None  # StartFlowOptions.retry_policy resolved, JSON; None: a failure stands
    retry: str | None = None  # JSON {attempt, firstRunId, previousRunId}: a retry run's place; None: attempt 1

    @property
    def is_running(self) -> bool:
        return self.status is FlowState.RUNNING

    @property
    def config(self) -> dict[str, Any]:
        """The run's FlowConfig as set (protojson keys: `stepDurability`, `continueAsNewThreshold`,
        `attributeStoreNames` {names}, ...); {} when none was given."""
        return _config(self.flow_config)

    @property
    def attribute_store_names(self) -> list[str] | None:
        """FlowConfig.attribute_store_names as set: None when never given, [] when projections are off."""
        names = self.config.get("attributeStoreNames")
        return None if names is None else list(names.get("names", []))

    @property
    def chain_first_run_id(self) -> str:
        return self.first_run_id or self.run_id


@quick_init
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
    heartbeats: int = 0  # the current (or last) attempt's heartbeats and Stream writes
    stream_writes: int = 0

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
    event_id: int  # per flow, from 1
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
    flow_config: str | None = None  # the flow's FlowConfig (FlowRecord.flow_config)


@dataclass(frozen=True, slots=True)
class Schedule:
    """When this process next has something to do: `due`, the first time a queued step or a
    retry is runnable; `foreign`, the (owner, first deadline) of running attempts other
    processes hold."""

    due: float | None
    foreign: tuple[tuple[str | None, float | None], ...]


@quick_init
@dataclass(frozen=True, slots=True)
class FlowProgress:
    """What a step's completion reads of its flow's row (`Tx.flow_progress`): the few columns it
    uses, not the whole `FlowRecord` (a transition's one flow read: ~2.5x cheaper)."""

    status: FlowState
    run_id: str
    graceful: bool
    completions: str  # JSON list of {"stepType", "stepExecutionId", "output"}
    flow_config: str | None
    step_numbers: str | None  # JSON {stepType: n, "": all}: step executions earlier runs numbered

    @property
    def is_running(self) -> bool:
        return self.status is FlowState.RUNNING


@dataclass(frozen=True, slots=True)
class ClosedFlow:
    """What the statement that closed a flow read of its row as it wrote it (RETURNING), so
    what follows the close need not read the row again."""

    completions: str  # the outputs it closed with (JSON list text, checked)
    has_parent: bool  # a SubFlow: its parent may wait on it
    has_snapshots: bool  # attribute snapshots of its method calls are left to drop


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
HISTORY_COLUMNS = columns(HistoryRecord).replace("event_id", "seq & 16777215")  # see schema.sql
STREAM_COLUMNS = columns(StreamRecord)


@functools.lru_cache(maxsize=256)
def _config_cached(text: str) -> Any:
    return json.loads(text)


def _config(text: str | None) -> dict[str, Any]:
    return {} if text is None else dict(_config_cached(text))


def db_of(conn: Any) -> str:
    """The path a connection opened (dexcli.store.connection.Connection keeps it), for messages."""
    return str(getattr(conn, "db_path", ":memory:"))


def _positions(record: type[Any], *names: str) -> tuple[int, ...]:
    order = [f.name for f in fields(record)]
    return tuple(order.index(n) for n in names)


# The JSON columns of each record (checked as a row is read: see `_checked`).
_FLOW_JSON = _positions(FlowRecord, "input", "completions", "timeout_handler_options", "flow_config",
                        "step_numbers", "retry_policy", "retry")
_STEP_JSON = _positions(StepRecord, "input", "options", "heartbeat_value", "recovery_error", "decision",
                        "wait_options", "wait", "condition_results", "locals")
_HISTORY_JSON = _positions(HistoryRecord, "payload")
_STREAM_JSON = _positions(StreamRecord, "value")
_E = TypeVar("_E", bound=enum.Enum)
_MEMBERS: dict[type[enum.Enum], dict[Any, enum.Enum]] = {}  # each state enum's members by stored value


def damaged_row(db: str, table: str, key: str, what: str) -> DamagedDatabaseError:
    """The one message of a row dex cannot have written: the file, the table, the row's key."""
    return DamagedDatabaseError(f"the database {db} is damaged: table {table} row {key}: {what}")


def json_value(text: Any, db: str, table: str, key: str, column: str = "value") -> Any:
    """A JSON column of a row read outside the records (attributes, channel messages, kv), parsed."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise damaged_row(db, table, key, f"{column} is not JSON ({exc})") from None


def _checked(values: list[Any], json_columns: tuple[int, ...], record: type[Any], db: str, table: str,
             key: str) -> None:
    """Every JSON column of a row parses: a row damaged outside dex is refused here, naming it,
    instead of failing later in whatever decodes it."""
    for i in json_columns:
        text = values[i]
        if text is None or text in _SEEN_JSON or _plain_json(text):
            continue
        if text in _SEEN_BEFORE:  # seen in the previous generation: kept on
            _remember(text)
            continue
        try:
            json.loads(text)
        except (TypeError, ValueError) as exc:
            raise damaged_row(db, table, key, f"{fields(record)[i].name} is not JSON ({exc})") from None
        if len(text) <= _SEEN_MAX_LEN:
            _remember(text)


def _plain_json(text: Any) -> bool:
    """A JSON text that needs no parse to know it is one: a non-negative integer as JSON spells
    it (a flow's or step's input is often one, and each is different: a cache only churns)."""
    return type(text) is str and text.isdigit() and text.isascii() and (text[0] != "0" or len(text) == 1)


def _remember(text: str) -> None:
    global _SEEN_JSON, _SEEN_BEFORE
    if len(_SEEN_JSON) >= _SEEN_MAX:  # a new generation; the last one is still looked at once
        _SEEN_BEFORE, _SEEN_JSON = _SEEN_JSON, set()
    _SEEN_JSON.add(text)


# Short JSON texts already parsed: most repeat (a step type's options, `{}`, `[]`, small inputs),
# and the scheduler reads the same rows pass after pass; a set lookup costs far less than a parse.
# Two generations of up to _SEEN_MAX each: when one is full the next begins, and what the
# previous one held moves on as it is seen again, so the texts in use stay whatever passes
# through (10,000 flows in flight cleared a single set every 4,096 new texts).
_SEEN_JSON: set[str] = set()
_SEEN_BEFORE: set[str] = set()
_SEEN_MAX, _SEEN_MAX_LEN = 4096, 1024


def stored_state(kind: type[_E], value: Any, db: str, table: str, key: str, column: str) -> _E:
    """A state column read as its enum; a value no dex writes is damage, named."""
    members = _MEMBERS.get(kind)
    if members is None:
        members = _MEMBERS[kind] = {m.value: m for m in kind}
    state = members.get(value)  # a dict lookup: ~1 us less than the enum's own call, per state read
    if state is not None:
        return state  # type: ignore[return-value]
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise damaged_row(db, table, key, f"{column} {value!r} is not one of {known}") from None


def flow_record(row: tuple[Any, ...], db: str) -> FlowRecord:
    """`db`: the database's path, named when the row is damaged (so for every record below)."""
    values = list(row)
    key = repr(values[0])
    _checked(values, _FLOW_JSON, FlowRecord, db, "flows", key)
    values[4], values[11] = stored_state(FlowState, values[4], db, "flows", key, "status"), bool(values[11])
    return FlowRecord(*values)


_PROGRESS_JSON = _positions(FlowProgress, "completions", "flow_config", "step_numbers")


def flow_progress(flow_id: str, row: tuple[Any, ...], db: str) -> FlowProgress:
    """A `Tx.flow_progress` row as its record, checked as `flow_record` checks a whole row."""
    values = list(row)
    key = repr(flow_id)
    _checked(values, _PROGRESS_JSON, FlowProgress, db, "flows", key)
    return FlowProgress(stored_state(FlowState, values[0], db, "flows", key, "status"), values[1],
                        bool(values[2]), values[3], values[4], values[5])


def step_record(row: tuple[Any, ...], db: str) -> StepRecord:
    values = list(row)
    key = f"{values[0]!r} {values[1]!r}"
    _checked(values, _STEP_JSON, StepRecord, db, "steps", key)
    values[7], values[19] = stored_state(StepState, values[7], db, "steps", key, "status"), bool(values[19])
    values[23], values[30] = stored_state(Method, values[23], db, "steps", key, "method"), bool(values[30])
    return StepRecord(*values)


def attempt_record(row: tuple[Any, ...], db: str) -> AttemptRecord:
    values = list(row)
    key = f"{values[0]!r} {values[1]!r} attempt {values[2]}"
    values[6] = stored_state(AttemptOutcome, values[6], db, "attempts", key, "outcome")
    return AttemptRecord(*values)


def history_record(row: tuple[Any, ...], db: str) -> HistoryRecord:
    _checked(list(row), _HISTORY_JSON, HistoryRecord, db, "history", f"{row[1]!r} event {row[0]}")
    return HistoryRecord(*row)


def stream_record(row: tuple[Any, ...], db: str) -> StreamRecord:
    _checked(list(row), _STREAM_JSON, StreamRecord, db, "stream_messages", f"id {row[0]}")
    return StreamRecord(*row)
