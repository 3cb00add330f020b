"""Step executions: queue, lease (attribute locks taken first), heartbeat, release; the
records they hand out (NextStep, Leased, AttemptKey, Outputs, Closed) and `Fenced`.

A method call (a step's wait_for, or its execute) spans all its attempts, as on a Dex server:
its locks are taken at its first lease and held until it ends (`end_call`), backoffs and
clean stops between attempts included; every attempt reads the attributes as they were at its
first lease; and a method that takes locks counts its TotalDuration from when it got them
(waiting for a lock spends none of it)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from dexcli.engine.deadlines import method_options
from dexcli.engine.flow_config import durability_of
from dexcli.sdk.options import ResolvedOptions, resolve_wait_options
from dexcli.sdk.registry import FlowDefinition, StepSpec
from dexcli.sdk.stream import Stream
from dexcli.store import AttemptOutcome, FlowState, Method, Runnable, StepRecord, StepState, Tx
from dexcli.store.records import quick_init

START_SOURCE = "__start__"


class Fenced(Exception):
    """The attempt no longer owns its step (taken over, or the flow closed): nothing applies."""


@dataclass(frozen=True, slots=True)
class NextStep:
    """A step execution to create: resolved and encoded before anything is written."""

    spec: StepSpec
    input_json: str
    options: ResolvedOptions
    wait_options: ResolvedOptions | None = None  # the wait_for method's, for a step that has one


@dataclass(frozen=True, slots=True)
class Leased:
    """A step whose attempt was leased to this process in the transaction; it starts after COMMIT."""

    step: StepRecord
    run_id: str
    spec: StepSpec
    definition: FlowDefinition
    options: ResolvedOptions  # the leased method's
    queue_counts: dict[str, int] = field(default_factory=dict)  # pending channel messages when leased
    attributes: dict[str, str] = field(default_factory=dict)  # the attribute snapshot (key -> JSON)
    durability: str = "SYNC"  # how its result commits: the method's, else its flow's FlowConfig (method_durability)


def leased(tx: Tx, step: StepRecord, run_id: str, spec: StepSpec, definition: FlowDefinition,
           flow_config: str | None = None) -> Leased:
    """The record of a step leased in this transaction, with the snapshot its handler reads:
    channel sizes (read after this transaction's writes) and attributes (its loaded maps
    included): read now for a method's first attempt, as they were then for the others."""
    opts = method_options(step)
    counts = tx.queue_counts(step.flow_id) if definition.channels else {}
    attrs: dict[str, str] = {}
    if definition.attributes:
        attrs = tx.attributes_of(step.flow_id, opts.loads) if step.method_attempt <= 1 else \
            tx.attributes_at_call_start(step.flow_id, step.step_execution_id, opts.loads)
    return Leased(step, run_id, spec, definition, opts, counts, attrs, durability_of(opts, flow_config))


def end_call(tx: Tx, step: StepRecord, now: float) -> None:
    """The method call `step` runs ended (completed, its wait committed, or failed for good):
    free its locks and wake their waiters. What it kept of the attributes for its retries is
    not read again (the next call of the step drops it as it begins, `lease`) and goes with
    the next write that keeps snapshots, or the flow's close: a step's usual end, which no
    RPC wrote during, runs no statement for it."""
    if method_options(step).locks:
        tx.release_locks(step.flow_id, step.step_execution_id, now)


@dataclass(frozen=True, slots=True)
class Closed:
    status: FlowState
    error_type: str | None = None
    message: str | None = None


def queue_step(tx: Tx, flow_id: str, nxt: NextStep, from_seid: str, now: float, numbers: tuple[int, int],
                owner: str | None = None, recovery_error: dict[str, str] | None = None) -> StepRecord:
    """Insert a step execution, QUEUED, or RUNNING with attempt 1 leased to `owner`."""
    step, conflict = new_step(tx, flow_id, nxt, from_seid, now, numbers, owner, recovery_error)
    tx.insert_step(step)
    if conflict is not None:
        tx.wait_for_lock(flow_id, step.step_execution_id, conflict[0], now)
    return step


def queue_steps(tx: Tx, new: list[tuple[StepRecord, tuple[str, str] | None]]) -> None:
    """`queue_step` for many step executions `new_step` made (one INSERT statement)."""
    tx.insert_steps([step for step, _ in new])
    for step, conflict in new:
        if conflict is not None:
            tx.wait_for_lock(step.flow_id, step.step_execution_id, conflict[0], step.scheduled_at)


def new_step(tx: Tx, flow_id: str, nxt: NextStep, from_seid: str, now: float, numbers: tuple[int, int],
             owner: str | None = None, recovery_error: dict[str, str] | None = None
             ) -> tuple[StepRecord, tuple[str, str] | None]:
    """The step execution `queue_step` inserts, its locks taken when it is leased to `owner`
    (or the lock it waits for instead: it is queued then), before it is inserted."""
    n, seq = numbers
    waits = nxt.spec.has_wait_for
    wait_opts = (nxt.wait_options or resolve_wait_options(nxt.spec.options())) if waits else None
    opts = wait_opts or nxt.options  # the first method's limits
    seid = f"{nxt.spec.step_type}-{n}"
    conflict = tx.try_locks(flow_id, opts.locks, seid, now) if opts.locks and owner is not None else None
    if conflict is not None:
        owner = None  # queued: it waits for the lock like any other
    is_leased = owner is not None
    step = StepRecord(
        flow_id=flow_id, step_execution_id=seid, step_type=nxt.spec.step_type, seq=seq,
        from_step_execution_id=from_seid, input=nxt.input_json, options=nxt.options.to_json(),
        status=StepState.RUNNING if is_leased else StepState.QUEUED, attempt=1 if is_leased else 0,
        scheduled_at=now, first_attempt_at=now if is_leased else None,
        next_attempt_at=None if is_leased else now, lease_owner=owner,
        attempt_started_at=now if is_leased else None, last_heartbeat_time=None,
        heartbeat_deadline=now + opts.heartbeat_timeout if is_leased else None,
        attempt_deadline=now + opts.method_timeout if is_leased else None,
        total_deadline=now + opts.total_duration, heartbeat_value=None, has_heartbeat_value=False,
        recovery_error=json.dumps(recovery_error) if recovery_error else None, decision=None, end_time=None,
        method=Method.WAIT_FOR if waits else Method.EXECUTE,
        wait_options=wait_opts.to_json() if wait_opts is not None else None)
    return step, conflict


def lease(tx: Tx, r: Runnable, definition: FlowDefinition, spec: StepSpec, owner: str, now: float) -> Leased | None:
    """Lease the next attempt of a runnable step, if nobody else did first. The first attempt
    of a method begins its call: its locks taken (the later ones hold them already)."""
    opts = method_options(r.step)
    hb_deadline, at_deadline = now + opts.heartbeat_timeout, now + opts.method_timeout
    begins = r.step.attempt == r.step.method_base
    conflict = tx.try_locks(r.step.flow_id, opts.locks, r.step.step_execution_id, now) if opts.locks else None
    if conflict is not None:  # another step or RPC holds one: wait for it (woken on release)
        tx.wait_for_lock(r.step.flow_id, r.step.step_execution_id, conflict[0], now)
        return None
    restart = now + opts.total_duration if begins and opts.locks else None
    if not tx.lease_step(r.step, owner, now, hb_deadline, at_deadline, restart):
        return None
    if begins and r.step.attempt:  # a step that never ran was never in a call: nothing was kept for it
        tx.forget_call_snapshot(r.step.flow_id, r.step.step_execution_id)
    attempt = r.step.attempt + 1
    step = _replace_step(r.step, status=StepState.RUNNING, attempt=attempt, lease_owner=owner,
                         attempt_started_at=now, first_attempt_at=r.step.first_attempt_at or now,
                         heartbeat_deadline=hb_deadline, attempt_deadline=at_deadline, next_attempt_at=None,
                         last_heartbeat_time=None, lock_wait=None, heartbeats=0, stream_writes=0,
                         total_deadline=r.step.total_deadline if restart is None else restart)
    return leased(tx, step, r.run_id, spec, definition, r.flow_config)


def _replace_step(step: StepRecord, **changes: Any) -> StepRecord:
    """`dataclasses.replace` for a StepRecord, without its per-call walk over the fields
    (~4 of ~6 µs): the values read in one attrgetter call, the changed ones set by position."""
    values = list(_STEP_VALUES(step))
    for name, value in changes.items():
        values[_STEP_INDEX[name]] = value
    return StepRecord(*values)


_STEP_FIELDS = tuple(f.name for f in fields(StepRecord))
_STEP_VALUES = attrgetter(*_STEP_FIELDS)
_STEP_INDEX = {name: i for i, name in enumerate(_STEP_FIELDS)}


@dataclass
class Outputs:
    """An attempt's heartbeats and Stream messages since its last commit."""

    last_time: float = 0.0
    checkpoint: tuple[bool, str | None] | None = None  # (has value, JSON) when set or cleared
    heartbeats: int = 0
    streams: list[tuple[Stream[Any], str, float, int]] = field(default_factory=list)  # (stream, JSON, at, size)


@quick_init  # one per attempt: its generated __init__ costs ~3 us through object.__setattr__
@dataclass(frozen=True, slots=True)
class AttemptKey:
    flow_id: str
    seid: str
    attempt: int
    owner: str


def heartbeat(tx: Tx, key: AttemptKey, flow_type: str, heartbeat_timeout: float,
              out: Outputs) -> list[int | None] | None:
    """Record an attempt's outputs. Returns each Stream message's resume token (None: it could
    never fit and was dropped), or None when the attempt is fenced (nothing written)."""
    if not tx.record_heartbeat(key.flow_id, key.seid, key.owner, key.attempt, out.last_time,
                               out.last_time + heartbeat_timeout, out.checkpoint, out.heartbeats, len(out.streams)):
        return None
    return [tx.append_stream(flow_type, stream.name, key.flow_id, f"#{key.seid}", text, at, size,
                             stream.stream_capacity_bytes)
            for stream, text, at, size in out.streams]


def release(tx: Tx, key: AttemptKey, now: float) -> bool:
    """This process stops cleanly while the attempt runs: the attempt ends INTERRUPTED and its
    step is runnable again at once (the next attempt reads the last checkpoint). An interrupted
    attempt does not count against maximum_attempts. False when the attempt was no longer ours."""
    if not tx.release_step(key.flow_id, key.seid, key.owner, key.attempt, now):
        return False
    tx.end_attempt(key.flow_id, key.seid, key.attempt, key.owner, now, AttemptOutcome.INTERRUPTED, None,
                   "its process stopped (Ctrl-C, SIGTERM or a closed output); the step runs again on resume")
    return True


def release_left(tx: Tx, owner: str, real_now: float) -> int:
    """This process stops and nothing of it runs any more: every attempt still leased to
    `owner` (one its bookkeeping lost track of: leased in a commit whose follow-up never ran, a
    task cancelled before it could say so) is released as `release` does. Returns how many."""
    return sum(release(tx, AttemptKey(step.flow_id, step.step_execution_id, step.attempt, owner), real_now + offset)
               for step, offset in tx.leased_to(owner))


def give_back(tx: Tx, key: AttemptKey, now: float) -> bool:
    """This process stops before a leased attempt began (Ctrl-C between a start and its drive):
    the lease is undone, not ended INTERRUPTED; the step is runnable at once as if never leased.
    False when the attempt was no longer ours."""
    return tx.give_back_step(key.flow_id, key.seid, key.owner, key.attempt, now)
