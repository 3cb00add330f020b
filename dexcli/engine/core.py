"""The engine: takes runnable step executions, runs their attempts under Dex's limits, and
commits each outcome — decision, next steps, history — in one transaction.

Rules (see the seed and reference/dex-semantics.md):
  - ExecuteMethodTimeout bounds one attempt (StartToClose).
  - HeartbeatTimeout: no heartbeat and no Stream message within the window (Heartbeat).
  - TotalDuration counts from when the first attempt was scheduled, covers every retry and also
    ends a running attempt (ScheduleToClose); a retry starts only while it has time left.
  - Retries back off initial * coefficient^(n-1), capped; retry_after replaces one delay.
  - Exhausted: the execute-failure route gets a new execution with the same input and
    `recovery_error`; without one the flow fails with WORKER_API_FAILED.

Several processes may share one database. An attempt belongs to the process that leased it;
another process declares it lost only once one of its deadlines has passed, and every write of
a stale owner is fenced by (owner, attempt, status) in its WHERE clause.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from dexcli.engine.attempt import AttemptRun, Outputs, invoke
from dexcli.engine.deadlines import earliest_deadline, iso, owner_alive, timeout_detail
from dexcli.engine.clock import Clock, real_pause
from dexcli.engine.faults import Faults
from dexcli.engine.runtime import Runtime, reset_runtime, set_runtime
from dexcli.sdk.codec import encode, from_jsonable, to_jsonable
from dexcli.sdk.decisions import DecisionKind, RetryAfter, StepDecision
from dexcli.sdk.errors import (
    AttemptFencedError,
    DexError,
    FlowAlreadyStartedError,
    FlowCodeError,
    FlowDefinitionError,
    InvalidStepResultError,
    NotSupportedYetError,
    UsageError,
    ValueMappingError,
)
from dexcli.sdk.flow import Flow
from dexcli.sdk.options import MIN_HEARTBEAT_TIMEOUT, StepOptions
from dexcli.sdk.registry import FlowDefinition, Registry, StepSpec
from dexcli.store import Store, Tx

log = logging.getLogger("dexcli.engine")

START_SOURCE = "__start__"
MAX_DETAIL = 1024
REAL_POLL_SECONDS = 0.5  # how often a real-time engine looks for other processes' changes
CLAIM_BATCH = 500
ALL = object()  # Engine._driving: every flow in the database (a worker)


@dataclass
class _StartPlan:
    definition: FlowDefinition
    start: StepSpec
    flow_id: str
    input_json: str
    opts: dict[str, Any]
    flow_ref: str | None
    request_id: str | None
    ignore_already_started: bool


class _Rollback(Exception):
    """Unwinds a group-commit transaction after one of its units failed."""


class _Fenced(Exception):
    """A transaction found that this attempt no longer owns its step; nothing is applied."""


@dataclass
class Event:
    """What the engine reports as it goes (the CLI's live view and `--json` lines)."""

    type: str
    flow_id: str
    time: float
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "flowId": self.flow_id, "time": iso(self.time), **self.data}


def error_identity(exc: BaseException) -> tuple[str, str]:
    """(`module.QualName`, detail) as the Dex Python SDK reports a handler's exception."""
    cls = type(exc)
    etype = f"{cls.__module__}.{cls.__qualname__}"[:256]
    detail = (str(exc) or cls.__name__)[:MAX_DETAIL]
    return etype, detail


def resolve_options(opts: StepOptions, definition: FlowDefinition, where: str) -> dict[str, Any]:
    """StepOptions -> the limits stored with a step execution (plain JSON)."""
    hb = opts.heartbeat_timeout
    if hb is not None and 0 < hb.total_seconds() < MIN_HEARTBEAT_TIMEOUT.total_seconds():
        raise InvalidStepResultError(f"{where}: heartbeat_timeout {hb.total_seconds():g} s is under 10 s")
    p = opts.retry_policy()
    assert p.initial_interval and p.maximum_interval and p.total_duration
    failure = None
    failure_opts = None
    if opts.execute_failure_step is not None:
        rec = definition.resolve(opts.execute_failure_step)
        if rec is None:
            raise InvalidStepResultError(f"{where}: the execute-failure step is not registered")
        failure = rec.step_type
        if opts.execute_failure_step_options is not None:
            failure_opts = resolve_options(opts.execute_failure_step_options, definition, where)
    return {
        "methodTimeout": opts.method_timeout_seconds(),
        "heartbeatTimeout": opts.heartbeat_timeout_seconds(),
        "initialInterval": p.initial_interval.total_seconds(),
        "backoffCoefficient": p.backoff_coefficient,
        "maximumInterval": p.maximum_interval.total_seconds(),
        "maximumAttempts": p.maximum_attempts,
        "totalDuration": p.total_duration.total_seconds(),
        "durability": opts.execute_durability.value,
        "failureStep": failure,
        "failureStepOptions": failure_opts,
    }


def retry_delay(opts: dict[str, Any], attempt: int) -> float:
    raw = opts["initialInterval"] * opts["backoffCoefficient"] ** (attempt - 1)
    return min(raw, opts["maximumInterval"])


class Engine:
    def __init__(self, store: Store, clock: Clock, registry: Registry | None = None, *,
                 owner: str | None = None, faults: Faults | None = None,
                 loader: Callable[[str], Flow[Any]] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.registry = registry or Registry()
        self._owner_base = owner or f"{socket.gethostname()}:{os.getpid()}"
        self.owner = f"{self._owner_base}:{uuid.uuid4().hex[:6]}"
        self.faults = faults or Faults()
        self.loader = loader
        self.listeners: list[Callable[[Event], None]] = []
        self._runs: dict[tuple[str, str], AttemptRun] = {}
        self._by_flow: dict[str, set[tuple[str, str]]] = {}
        self._driving: frozenset[str] | object | None = None  # flows inside run(): ALL, a set, or None
        self._pending: dict[tuple[str, str], tuple[AttemptRun, Outputs]] = {}
        self._flush_scheduled = False
        self._commits: list[tuple[AttemptRun, Callable[[Tx], Any], Callable[[Any], None], Any]] = []
        self._commit_scheduled = False
        self._starts: list[tuple[_StartPlan, asyncio.Future[str]]] = []
        self._wake: asyncio.Event | None = None
        self._context: contextvars.Context | None = None  # run()'s, with the runtime set
        self._next_offset_read = 0.0  # real monotonic time of the next look at the database clock
        self._unloadable: dict[str, str] = {}
        self._resolved: dict[tuple[int, StepOptions], dict[str, Any]] = {}
        self._resolved_json: dict[int, str] = {}  # id(resolved dict) -> its JSON
        self.stats = {"attempts": 0, "transitions": 0, "heartbeat_flushes": 0, "flows_closed": 0}

    # ------------------------------------------------------------------ definitions ------
    def definition_for(self, flow_type: str, flow_ref: str | None) -> FlowDefinition:
        d = self.registry.get(flow_type)
        if d is not None:
            return d
        if flow_ref and self.loader is not None:
            flow = self.loader(flow_ref)
            d = self.registry.add(flow)
            if d.flow_type != flow_type:
                raise FlowDefinitionError(f"{flow_ref} now defines {d.flow_type}, not {flow_type}")
            return d
        raise UsageError(f"flow type {flow_type} is not registered in this process")

    def _options(self, opts: StepOptions, definition: FlowDefinition, spec: StepSpec) -> dict[str, Any]:
        """resolve_options, cached per flow definition and StepOptions value (treat the result as
        read-only: it is shared)."""
        key = (id(definition), opts)
        try:
            hit = self._resolved.get(key)
        except TypeError:  # an unhashable option value: resolve every time
            return resolve_options(opts, definition, f"flow {definition.flow_type}, step {spec.step_type}")
        if hit is None:
            hit = resolve_options(opts, definition, f"flow {definition.flow_type}, step {spec.step_type}")
            self._resolved[key] = hit
            self._resolved_json[id(hit)] = json.dumps(hit)
        return hit

    # ------------------------------------------------------------------ events -----------
    def emit(self, type_: str, flow_id: str, **data: Any) -> None:
        if not self.listeners:
            return
        ev = Event(type_, flow_id, self.clock.now(), data)
        for fn in list(self.listeners):
            fn(ev)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------------ start ------------
    def start_flow(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None, *,
                   flow_ref: str | None = None, request_id: str | None = None,
                   ignore_already_started: bool = False) -> str:
        """Create the run and queue its start step (one transaction). Returns the run id."""
        plan = self._start_plan(flow, flow_id, input, flow_ref, request_id, ignore_already_started)
        with self.store.tx() as tx:
            run_id, created, _ = self._insert_start(tx, plan, lease=False)
        if created:
            self.emit("flowStarted", plan.flow_id, flowType=plan.definition.flow_type, runId=run_id)
            self._poke()
        return run_id

    async def start_flow_async(self, flow: Flow[Any], flow_id: str | None = None, input: Any = None, *,
                               flow_ref: str | None = None, request_id: str | None = None,
                               ignore_already_started: bool = False) -> str:
        """`start_flow` for code on the engine's loop. Starts requested in the same loop pass
        share one transaction (group commit); each returns once committed.
        While this engine runs every flow (a worker), the start step's first attempt is leased
        to it in that transaction and starts at once."""
        plan = self._start_plan(flow, flow_id, input, flow_ref, request_id, ignore_already_started)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str] = loop.create_future()
        self._starts.append((plan, fut))
        if len(self._starts) == 1:
            loop.call_soon(self._flush_starts)
        return await fut

    def _flush_starts(self) -> None:
        batch, self._starts = [(p, f) for p, f in self._starts if not f.cancelled()], []
        done: list[tuple[_StartPlan, asyncio.Future[str], str | None, BaseException | None,
                         dict[str, Any] | None]] = []
        try:
            with self.store.tx() as tx:
                for plan, fut in batch:
                    try:  # a taken flow id, the one error of a single start, is found before any write
                        run_id, created, row = self._insert_start(tx, plan, lease=self._drives(plan.flow_id))
                    except FlowAlreadyStartedError as exc:
                        done.append((plan, fut, None, exc, None))
                    else:
                        done.append((plan, fut, run_id if created else None, None, row))
                        if not created:
                            fut.set_result(run_id)
        except Exception as exc:  # the transaction failed: none of them started
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for plan, fut, run_id, exc, row in done:
            if exc is not None:
                fut.set_exception(exc)
            elif run_id is not None:
                self.emit("flowStarted", plan.flow_id, flowType=plan.definition.flow_type, runId=run_id)
                if row is not None and row["status"] == "RUNNING":
                    self._start_attempt(plan.definition, plan.start, row, row["attempt_started_at"])
                fut.set_result(run_id)
        self._poke()

    def _start_plan(self, flow: Flow[Any], flow_id: str | None, input: Any, flow_ref: str | None,
                    request_id: str | None, ignore_already_started: bool) -> _StartPlan:
        """Everything about a start that needs no database: checks, input, options."""
        definition = self.registry.definition_of(flow)
        start = definition.start_step
        if start is None:
            raise FlowDefinitionError(f"flow {definition.flow_type}: has no start step")
        flow_id = flow_id or f"{definition.flow_type.lower()}-{uuid.uuid4().hex[:8]}"
        if not flow_id or any(c in flow_id for c in "/$:"):
            raise UsageError(f"flow id {flow_id!r} must be non-empty and contain no '/', '$' or ':'")
        try:
            input_json = encode(from_jsonable(to_jsonable(input), start.input_type))
        except ValueMappingError as exc:
            raise ValueMappingError(f"input for {start.step_type}: {exc}") from None
        return _StartPlan(definition, start, flow_id, input_json, self._options(start.options(), definition, start),
                          flow_ref, request_id, ignore_already_started)

    def _insert_start(self, tx: Tx, plan: _StartPlan, lease: bool) -> tuple[str, bool, dict[str, Any] | None]:
        """The start transaction's statements: (run id, created, start step row). An existing
        flow id is refused, or returned unchanged for the same request id with
        ignore_already_started. With `lease` the start step's first attempt is leased here."""
        now = self.clock.now()
        run_id = str(uuid.uuid4())
        definition, start = plan.definition, plan.start
        if not tx.insert_flow_if_new(
                flow_id=plan.flow_id, run_id=run_id, flow_type=definition.flow_type, flow_ref=plan.flow_ref,
                status="RUNNING", input=plan.input_json, request_id=plan.request_id or str(uuid.uuid4()),
                start_time=now):
            existing = tx.get_flow(plan.flow_id)
            assert existing is not None
            if plan.ignore_already_started and plan.request_id and existing["request_id"] == plan.request_id:
                return str(existing["run_id"]), False, None
            raise FlowAlreadyStartedError(
                f"flow {plan.flow_id} already exists ({existing['status']}, {existing['flow_type']}); "
                "choose another --flow-id"
            )
        row = self._insert_step(tx, plan.flow_id, run_id, start, plan.input_json, plan.opts, START_SOURCE, now,
                                lease=lease)
        tx.add_event(plan.flow_id, now, "FlowStarted", {
            "flowType": definition.flow_type, "runId": run_id, "startStepType": start.step_type,
            "startStepExecutionId": row["step_execution_id"], "input": json.loads(plan.input_json),
        })
        return run_id, True, row

    def _insert_step(self, tx: Tx, flow_id: str, run_id: str, spec: StepSpec, input_json: str,
                     opts: dict[str, Any], from_seid: str, now: float,
                     recovery_error: dict[str, str] | None = None, lease: bool = False,
                     numbers: tuple[int, int] | None = None) -> dict[str, Any]:
        """Queue a step execution; with `lease`, start its first attempt here in the same
        transaction (the step this process runs next needs no claim of its own). Returns the row.
        `numbers` is (n, seq) when the caller has already counted (`Tx.next_step_number`)."""
        if numbers is None:
            numbers = (1, 1) if from_seid == START_SOURCE else tx.next_step_number(flow_id, spec.step_type)
        n, seq = numbers
        row: dict[str, Any] = dict(
            flow_id=flow_id, step_execution_id=f"{spec.step_type}-{n}", step_type=spec.step_type, seq=seq,
            from_step_execution_id=from_seid, input=input_json,
            options=self._resolved_json.get(id(opts)) or json.dumps(opts),
            status="QUEUED", attempt=0, scheduled_at=now, next_attempt_at=now,
            total_deadline=now + opts["totalDuration"],
            recovery_error=json.dumps(recovery_error) if recovery_error else None,
        )
        if lease:
            row.update(self._lease_fields(opts, now, attempt=1, first_attempt_at=now))
        tx.insert_step(**row)
        if lease:
            tx.insert_attempt(flow_id=flow_id, step_execution_id=row["step_execution_id"], attempt=1,
                              owner=self.owner, start_time=now, outcome="RUNNING")
            row.update(run_id=run_id, has_heartbeat_value=0, heartbeat_value=None, opts=opts)
        return row

    def _lease_fields(self, opts: dict[str, Any], now: float, attempt: int, first_attempt_at: float) -> dict[str, Any]:
        """The step columns of a running attempt leased to this process."""
        return dict(status="RUNNING", attempt=attempt, lease_owner=self.owner, attempt_started_at=now,
                    first_attempt_at=first_attempt_at, last_heartbeat_time=None,
                    heartbeat_deadline=now + opts["heartbeatTimeout"],
                    attempt_deadline=now + opts["methodTimeout"], next_attempt_at=None)

    def _drives(self, flow_id: str) -> bool:
        """Whether this engine is inside `run()` for this flow (and may lease its next steps)."""
        return self._driving is not None and (self._driving is ALL or flow_id in self._driving)

    def _start_attempt(self, definition: FlowDefinition, spec: StepSpec, row: dict[str, Any], now: float) -> None:
        run = AttemptRun(self, definition, spec, row, now)
        self._runs[run.key] = run
        self._by_flow.setdefault(run.flow_id, set()).add(run.key)
        self.stats["attempts"] += 1
        loop = asyncio.get_running_loop()
        ctx = self._context.copy() if self._context is not None else None
        run.task = loop.create_task(self._run_attempt(run), context=ctx)

    # ------------------------------------------------------------------ driving ----------
    async def run(self, flow_ids: list[str] | None = None, *, until_idle: bool = True,
                  stop: Callable[[], bool] | None = None, stop_poll: float | None = None) -> None:
        """Drive flows until `stop()` is true, or (until_idle) nothing of them is left to run.

        flow_ids=None drives every flow in the database (a worker). `stop` is checked whenever
        something changes, and at least every `stop_poll` seconds of the engine's clock.

        Each call leases under a new owner id: an attempt a previous call left running (it was
        stopped mid-attempt) is then treated like a crashed process's — declared lost once its
        heartbeat deadline passes, and retried.
        """
        if not self._runs:
            self.owner = f"{self._owner_base}:{uuid.uuid4().hex[:6]}"
        self._driving = ALL if flow_ids is None else frozenset(flow_ids)
        self._wake = asyncio.Event()
        token = set_runtime(Runtime(self.store, self.clock))
        self._context = contextvars.copy_context()  # attempts run in it, whoever started them
        poll = self.clock.follow_real and not self.clock.auto_advance
        try:
            while True:
                now = self.clock.now()
                if poll and self.clock.real_monotonic() >= self._next_offset_read:  # another process's `dex time skip`
                    self._next_offset_read = self.clock.real_monotonic() + REAL_POLL_SECONDS
                    self.clock.set_offset(self.store.clock_offset())
                    now = self.clock.now()
                ids = self._driven(flow_ids)
                if flow_ids is not None and not ids and self._unloadable:
                    fid = next(iter(self._unloadable))
                    raise UsageError(f"cannot run flow {fid}: {self._unloadable[fid]}")
                due, foreign = self.store.schedule(ids, self.owner)  # one read per pass
                if any(t is not None and t <= now for _, t in foreign):
                    self._reap(now, ids)
                    due, foreign = self.store.schedule(ids, self.owner)
                if due is not None and due <= now:
                    self._claim(now, ids)
                    due, foreign = self.store.schedule(ids, self.owner)
                if stop is not None and stop():
                    break
                if until_idle and not self._runs and due is None and not foreign:
                    break  # nothing queued, retrying or running anywhere in these flows
                wake_at, live_foreign = self._next_wake(due, foreign)
                timeout = None if wake_at is None else max(0.0, wake_at - self.clock.now())
                if poll:
                    timeout = REAL_POLL_SECONDS if timeout is None else min(timeout, REAL_POLL_SECONDS)
                elif self.clock.auto_advance and self.clock.follow_real and not self._runs and (
                        timeout is None or live_foreign or flow_ids is None):
                    # Skipping time with nothing of ours running: another live process may hold
                    # work (never jump the shared clock over its lease), or new work may be
                    # started by another process. Look again after a real pause; a busy thread
                    # keeps the clock from jumping meanwhile.
                    if timeout is None or timeout > 0:
                        await real_pause(min(REAL_POLL_SECONDS, timeout or REAL_POLL_SECONDS))
                    continue
                if stop is not None and stop_poll is not None:
                    timeout = stop_poll if timeout is None else min(timeout, stop_poll)
                self._wake.clear()
                if timeout is None or timeout > 0:
                    try:
                        await asyncio.wait_for(self._wake.wait(), timeout)
                    except (asyncio.TimeoutError, TimeoutError):
                        pass
                else:
                    await asyncio.sleep(0)
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # 3.11's wait_for swallows a cancel that lands as the wake fires: honour it
                    raise asyncio.CancelledError()
        finally:
            self._driving = None
            reset_runtime(token)
            self._flush()

    def _next_wake(self, due: float | None, foreign: list[tuple[str | None, float | None]]
                   ) -> tuple[float | None, bool]:
        """When something is next due, and whether a live process holds a lease here.

        `due` is the earliest queued step or retry; `foreign` the (owner, first deadline) of
        attempts other processes hold. A lease held by a live process is not a deadline to skip
        to: its owner heartbeats in real time. A dead owner's deadline is (that is how a crashed
        attempt gets declared lost).
        """
        times = [due] if due is not None else []
        live = False
        # Only a worker (all flows) respects live leases: `dex resume ID --time-skip` is an
        # explicit request to take that flow over, e.g. from a stuck (SIGSTOPped) process.
        respect_live = self.clock.auto_advance and self.clock.follow_real and self._driving is ALL
        alive: dict[str, bool] = {}
        for owner, t in foreign:
            owner = owner or ""
            ours = owner.startswith(self._owner_base + ":")  # an earlier session of this engine
            if respect_live and not ours:
                if owner not in alive:
                    alive[owner] = owner_alive(owner)
                if alive[owner]:
                    live = True
                    continue
            if t is not None:
                times.append(t)
        return (min(times) if times else None), live

    async def shutdown(self) -> None:
        """Stop local attempts without recording anything (as a crash would, but politely)."""
        for run in list(self._runs.values()):
            run.fence("process stopping")
            if run.task is not None:
                run.task.cancel()
        self._runs.clear()

    def _driven(self, flow_ids: list[str] | None) -> list[str] | None:
        if flow_ids is None and not self._unloadable:
            return None
        if flow_ids is None:
            return [f for f in self.store.running_flow_ids() if f not in self._unloadable]
        return [f for f in flow_ids if f not in self._unloadable]

    def _claim(self, now: float, flow_ids: list[str] | None) -> None:
        """Lease the runnable steps (the caller saw one due) and start their attempts."""
        with self.store.tx() as tx:
            rows = tx.runnable_steps(now, flow_ids, CLAIM_BATCH)
            claimed = []
            for row in rows:
                if row["flow_status"] != "RUNNING":
                    continue
                try:
                    definition = self.definition_for(row["flow_type"], row["flow_ref"])
                except DexError as exc:
                    self._unloadable[row["flow_id"]] = str(exc)
                    continue
                spec = definition.steps.get(row["step_type"])
                if spec is None:
                    self._unloadable[row["flow_id"]] = f"step {row['step_type']} is no longer in the flow"
                    continue
                attempt = row["attempt"] + 1
                ok = tx.update_step(
                    row["flow_id"], row["step_execution_id"],
                    where={"status": row["status"], "attempt": row["attempt"]},
                    **self._lease_fields(json.loads(row["options"]), now, attempt, row["first_attempt_at"] or now),
                )
                if not ok:
                    continue
                tx.insert_attempt(flow_id=row["flow_id"], step_execution_id=row["step_execution_id"],
                                  attempt=attempt, owner=self.owner, start_time=now, outcome="RUNNING")
                row = dict(row, attempt=attempt, status="RUNNING", first_attempt_at=row["first_attempt_at"] or now)
                claimed.append((definition, spec, row))
        for definition, spec, row in claimed:
            self._start_attempt(definition, spec, row, now)

    # ------------------------------------------------------------------ one attempt ------
    async def _run_attempt(self, run: AttemptRun) -> None:
        try:
            self.emit("attemptStarted", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                      attempt=run.attempt, maxAttempts=run.opts["maximumAttempts"],
                      heartbeatTimeout=run.opts["heartbeatTimeout"])
            self.faults.hit("attempt-start", run.spec.step_type, where=f"{run.seid} attempt {run.attempt}")
            await self._attempt(run)
        except asyncio.CancelledError:  # fenced from outside: lease lost, flow closed, shutdown
            run.fence(run.fenced or "cancelled")
        except Exception as exc:  # the outcome could not be recorded (a database error, a bug)
            run.fence(f"its outcome could not be recorded: {exc}")
            log.error("%s attempt %d of flow %s: its outcome could not be recorded; the step stays "
                      "RUNNING until its lease is declared lost", run.seid, run.attempt, run.flow_id,
                      exc_info=exc)
            self.emit("engineError", run.flow_id, stepExecutionId=run.seid, attempt=run.attempt,
                      error=f"{type(exc).__name__}: {exc}")
        finally:
            if self._runs.get(run.key) is run:
                del self._runs[run.key]
                keys = self._by_flow.get(run.flow_id)
                if keys is not None:
                    keys.discard(run.key)
                    if not keys:
                        del self._by_flow[run.flow_id]
            self._poke()

    def _watch(self, run: AttemptRun) -> None:
        """The attempt's watchdog: a timer at its earliest deadline (no task of its own). A
        heartbeat moves the deadline in memory; the timer then re-arms at the new one."""
        run.timer = None
        if run.task is None or run.task.done() or run.fenced:
            return
        deadline, kind = run.next_deadline()
        loop = run.task.get_loop()
        if loop.time() >= deadline:
            run.timed_out = (deadline, kind)
            run.fence(f"{kind} timeout")
            run.task.cancel()
        else:
            run.timer = loop.call_at(deadline, self._watch, run)

    async def _attempt(self, run: AttemptRun) -> None:
        value = from_jsonable(json.loads(run.row["input"]) if run.row["input"] else None, run.spec.input_type)
        run.timer = asyncio.get_running_loop().call_at(run.next_deadline()[0], self._watch, run)
        error: BaseException | None = None
        result: Any = None
        try:
            result = await invoke(run, value)
        except asyncio.CancelledError:
            if run.timed_out is None:
                raise
        except Exception as exc:  # judged below, once the watchdog is off
            error = exc
        finally:
            if run.timer is not None:
                run.timer.cancel()
                run.timer = None
        if run.timed_out is not None:
            at, kind = run.timed_out
            await self._fail(run, kind, timeout_detail(kind, run.opts), at, outcome="TIMED_OUT")
            return
        if run.ended() or isinstance(error, AttemptFencedError):
            return
        if isinstance(error, (NotSupportedYetError, FlowCodeError)):  # retrying cannot help
            await self._fail(run, *error_identity(error), self.clock.now(), fatal=True)
            return
        if isinstance(error, RetryAfter):
            cause = error.cause if error.cause is not None else error
            await self._fail(run, *error_identity(cause), self.clock.now(), delay_override=error.seconds)
            return
        if error is not None:  # any other handler error is transient: the retry policy decides
            await self._fail(run, *error_identity(error), self.clock.now())
            return
        try:
            plan = self._plan(run, result)
        except (InvalidStepResultError, ValueMappingError) as exc:
            await self._fail(run, *error_identity(exc), self.clock.now())
            return
        await self._complete(run, result, plan)

    # ------------------------------------------------------------------ outputs ----------
    def outputs_for(self, run: AttemptRun) -> Outputs:
        entry = self._pending.get(run.key)
        if entry is None or entry[0] is not run:
            entry = (run, Outputs())
            self._pending[run.key] = entry
        if not self._flush_scheduled:
            self._flush_scheduled = True
            try:
                asyncio.get_running_loop().call_soon(self._flush)
            except RuntimeError:  # called from a handler thread
                loop = self._loop_of(run)
                if loop is not None:
                    loop.call_soon_threadsafe(self._flush)
        return entry[1]

    @staticmethod
    def _loop_of(run: AttemptRun) -> asyncio.AbstractEventLoop | None:
        return run.task.get_loop() if run.task is not None else None

    def _flush(self) -> None:
        """Group commit: every pending heartbeat and Stream message in one transaction."""
        self._flush_scheduled = False
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        results: list[tuple[AttemptRun, Outputs, bool, list[int | None]]] = []
        with self.store.tx() as tx:
            for run, out in pending.values():
                ok, tokens = self._apply_outputs(tx, run, out)
                results.append((run, out, ok, tokens))
        self.stats["heartbeat_flushes"] += 1
        for run, out, ok, tokens in results:
            if not ok:
                run.fence("lease lost: another process took the attempt over, or the flow closed")
                if run.task is not None:
                    run.task.cancel()
                continue
            self._after_outputs(run, out, tokens)

    def _apply_outputs(self, tx: Tx, run: AttemptRun, out: Outputs) -> tuple[bool, list[int | None]]:
        fields: dict[str, Any] = {"last_heartbeat_time": out.last_time,
                                  "heartbeat_deadline": out.last_time + run.opts["heartbeatTimeout"]}
        if out.checkpoint is not None:
            fields["has_heartbeat_value"], fields["heartbeat_value"] = out.checkpoint
        ok = tx.update_step(run.flow_id, run.seid,
                            where={"lease_owner": self.owner, "attempt": run.attempt, "status": "RUNNING"},
                            **fields)
        if not ok:
            return False, []
        tokens = []
        for stream, text, at, size in out.streams:
            tokens.append(tx.append_stream(run.definition.flow_type, stream.name, run.flow_id,
                                           f"#{run.seid}", text, at, size, stream.stream_capacity_bytes))
        tx.bump_attempt_counters(run.flow_id, run.seid, run.attempt, out.heartbeats, len(out.streams),
                                 out.last_time)
        return True, tokens

    def _after_outputs(self, run: AttemptRun, out: Outputs, tokens: list[int | None]) -> None:
        for (stream, text, at, _), token in zip(out.streams, tokens):
            run.stream_writes += 1
            self.emit("streamMessage", run.flow_id, stepExecutionId=run.seid, stream=stream.name,
                      value=json.loads(text), resumeToken=str(token) if token else None,
                      source=f"#{run.seid}", dropped=token is None)
            self.faults.hit("stream-write", run.spec.step_type, run.stream_writes,
                            where=f"{run.seid} attempt {run.attempt}, message {run.stream_writes}")
        if out.heartbeats:
            run.heartbeats += out.heartbeats
            self.emit("heartbeat", run.flow_id, stepExecutionId=run.seid, attempt=run.attempt,
                      checkpoint=json.loads(out.checkpoint[1]) if out.checkpoint and out.checkpoint[0] else None,
                      hasCheckpoint=bool(out.checkpoint and out.checkpoint[0]), count=run.heartbeats)
            self.faults.hit("heartbeat", run.spec.step_type, run.heartbeats,
                            where=f"{run.seid} attempt {run.attempt}, heartbeat {run.heartbeats}")

    def _take_outputs(self, tx: Tx, run: AttemptRun, taken: list[tuple[tuple[str, str], Any]]
                      ) -> tuple[Outputs, list[int | None]] | None:
        """Write the attempt's pending heartbeats and messages (noted in `taken`, to be put
        back if the transaction rolls back)."""
        entry = self._pending.get(run.key)
        if entry is None or entry[0] is not run:
            return None
        del self._pending[run.key]
        taken.append((run.key, entry))
        ok, tokens = self._apply_outputs(tx, run, entry[1])
        if not ok:
            raise _Fenced()
        return entry[1], tokens

    # ------------------------------------------------------------------ success ----------
    def _plan(self, run: AttemptRun, decision: Any) -> list[tuple[StepSpec, str, dict[str, Any]]]:
        """Check a decision before anything is written; resolve its movements."""
        if not isinstance(decision, StepDecision):
            raise InvalidStepResultError(
                f"{run.spec.step_type}.execute returned {type(decision).__name__}, not a StepDecision"
            )
        movements = []
        for m in decision.movements:
            spec = run.definition.resolve(m.step)
            if spec is None:
                name = m.step.__name__ if isinstance(m.step, type) else type(m.step).__name__
                raise InvalidStepResultError(
                    f"{run.spec.step_type} moved to {name}, which is not a registered step of "
                    f"{run.definition.flow_type}"
                )
            try:
                input_json = encode(from_jsonable(to_jsonable(m.input), spec.input_type))
            except ValueMappingError as exc:
                raise InvalidStepResultError(f"input for {spec.step_type}: {exc}") from None
            opts = m.options if m.options is not None else spec.options()
            movements.append((spec, input_json, self._options(opts, run.definition, spec)))
        if decision.has_output:
            encode(decision.output)
        return movements

    async def _commit_attempt(self, run: AttemptRun, body: Callable[[Tx], Any],
                              after: Callable[[Any], None]) -> None:
        """End an attempt: its pending heartbeats and Stream messages, then `body`, committed
        before `after(result)` runs. Outcomes that arrive in the same loop pass share one
        transaction (group commit); a fenced attempt — a stale owner, a closed flow — is left
        out of it and nothing of it is applied (see `_flush_commits`)."""
        fut = asyncio.get_running_loop().create_future()
        self._commits.append((run, body, after, fut))
        if not self._commit_scheduled:
            self._commit_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_commits)
        try:
            await fut
        except asyncio.CancelledError:
            if not fut.done():  # cancelled before its commit: fenced, the commit is skipped
                run.fence(run.fenced or "cancelled")
            raise

    def _flush_commits(self) -> None:
        """Commit the queued attempt outcomes in one transaction. No savepoints: if one of them
        is fenced or fails, the whole transaction rolls back, that one is settled alone and the
        rest are committed again without it (rare, and nothing of the failed one is applied)."""
        self._commit_scheduled = False
        batch = [item for item in self._commits if not item[3].cancelled()]
        self._commits = []
        settled: list[tuple[asyncio.Future[None], BaseException | None]] = []
        done: list[tuple[Any, ...]] = []
        while batch:
            done, failed, taken = [], None, []
            try:
                with self.store.tx() as tx:
                    for i, (run, body, after, fut) in enumerate(batch):
                        try:
                            outputs = self._take_outputs(tx, run, taken)
                            result = body(tx)
                        except Exception as exc:
                            failed = (i, exc)
                            raise _Rollback() from None
                        done.append((run, (result, outputs), after, fut))
            except _Rollback:
                for key, entry in taken:  # their heartbeats and messages go out with the retry
                    self._pending.setdefault(key, entry)
                assert failed is not None
                i, exc = failed
                run, fut = batch[i][0], batch[i][3]
                if isinstance(exc, _Fenced):
                    run.fence("step no longer owned (flow closed or attempt taken over)")
                    settled.append((fut, None))
                else:  # a bug or a database error: that attempt's task fails
                    settled.append((fut, exc))
                batch = batch[:i] + batch[i + 1:]
                continue
            except Exception as exc:  # the transaction itself failed: every attempt in it fails
                settled += [(fut, exc) for _, _, _, fut in batch]
                done = []
            break
        for run, (result, outputs), after, fut in done:
            self.stats["transitions"] += 1
            if outputs is not None:
                self._after_outputs(run, *outputs)
            after(result)
            if not fut.done():
                fut.set_result(None)
        for fut, exc in settled:
            if not fut.done():
                fut.set_exception(exc) if exc is not None else fut.set_result(None)

    async def _complete(self, run: AttemptRun, decision: StepDecision,
                  plan: list[tuple[StepSpec, str, dict[str, Any]]]) -> None:
        self.faults.hit("before-commit", run.spec.step_type, where=f"{run.seid} attempt {run.attempt}")
        now = self.clock.now()
        kind = decision.kind
        output = to_jsonable(decision.output) if decision.has_output else None
        summary: dict[str, Any] = {"kind": kind.value}

        def body(tx: Tx) -> tuple[tuple[str, str | None, str | None] | None, list[tuple[StepSpec, dict[str, Any]]]]:
            flow = (tx.get_flow_numbering(run.flow_id, plan[0][0].step_type) if plan else tx.get_flow(run.flow_id))
            if flow is None or flow["status"] != "RUNNING":
                raise _Fenced()
            lease = self._drives(run.flow_id)
            rows = [self._insert_step(tx, run.flow_id, flow["run_id"], spec, input_json, opts, run.seid, now,
                                      lease=lease, numbers=(flow["_n"] + 1, flow["_seq"] + 1) if i == 0 else None)
                    for i, (spec, input_json, opts) in enumerate(plan)]
            next_ids = [r["step_execution_id"] for r in rows]
            if plan:
                summary["next"] = [{"stepType": s.step_type, "stepExecutionId": i, "input": json.loads(j)}
                                   for (s, j, _), i in zip(plan, next_ids)]
            if decision.has_output:
                summary["output"] = output
            if decision.reason is not None:
                summary["reason"] = decision.reason
            ok = tx.update_step(run.flow_id, run.seid,
                                where={"lease_owner": self.owner, "attempt": run.attempt, "status": "RUNNING"},
                                status="COMPLETED", decision=json.dumps(summary), end_time=now)
            if not ok:
                raise _Fenced()
            tx.update_attempt(run.flow_id, run.seid, run.attempt, end_time=now, outcome="COMPLETED")
            completions = json.loads(flow["completions"])
            flow_fields: dict[str, Any] = {}
            if decision.has_output and kind in (DecisionKind.GRACEFUL_COMPLETE, DecisionKind.FORCE_COMPLETE):
                completions.append({"stepType": run.spec.step_type, "stepExecutionId": run.seid,
                                    "output": output})
                flow_fields["completions"] = json.dumps(completions)
            tx.add_event(run.flow_id, now, "StepExecuteCompleted", {
                "stepExecutionId": run.seid, "fromStepExecutionId": run.row["from_step_execution_id"],
                "stepType": run.spec.step_type, "attempt": run.attempt,
                "startedTime": iso(run.started), "duration": round(now - run.started, 6),
                "decision": summary,
            })
            if kind is DecisionKind.GRACEFUL_COMPLETE:
                flow_fields["graceful"] = 1
            closed: tuple[str, str | None, str | None] | None = None
            if kind is DecisionKind.FORCE_COMPLETE:
                closed = ("COMPLETED", None, None)
            elif kind is DecisionKind.FORCE_FAIL:
                closed = ("FAILED", "STEP_DECISION_FAILED", decision.reason)
            idle = False
            if closed is None and (flow["graceful"] or kind is DecisionKind.GRACEFUL_COMPLETE):
                idle = tx.active_step_count(run.flow_id) == 0
                if idle:
                    closed = ("COMPLETED", None, None)
            if closed is not None:
                self._close(tx, run.flow_id, now, *closed, completions=completions, open_steps=not idle,
                            flow_fields=flow_fields)
                return closed, []
            if flow_fields:
                tx.update_flow(run.flow_id, **flow_fields)
            return None, [(spec, row) for (spec, _, _), row in zip(plan, rows) if lease]

        def after(result: tuple[tuple[str, str | None, str | None] | None, list[tuple[StepSpec, dict[str, Any]]]]
                  ) -> None:
            closed, leased = result
            self.emit("stepCompleted", run.flow_id, stepExecutionId=run.seid, stepType=run.spec.step_type,
                      attempt=run.attempt, duration=now - run.started, decision=summary)
            if closed is not None:
                self._after_close(run.flow_id, closed)
            for spec, row in leased:  # leased in the commit above: their attempts start now
                self._start_attempt(run.definition, spec, row, now)
            self.faults.hit("after-commit", run.spec.step_type, where=f"{run.seid} attempt {run.attempt}")
            self._poke()

        await self._commit_attempt(run, body, after)

    def _close(self, tx: Tx, flow_id: str, now: float, status: str, error_type: str | None,
               message: str | None, completions: list[Any] | None = None, open_steps: bool = True,
               flow_fields: dict[str, Any] | None = None) -> None:
        if open_steps:  # False: the caller has just counted none
            tx.cancel_open_steps(flow_id, now)
        tx.close_flow(flow_id, status, now, error_type, message, **(flow_fields or {}))
        if completions is None:
            flow = tx.get_flow(flow_id)
            completions = json.loads(flow["completions"]) if flow else []
        tx.add_event(flow_id, now, "FlowClosed", {"flowStatus": status, "errorType": error_type,
                                                  "errorMessage": message, "results": completions})

    def _after_close(self, flow_id: str, closed: tuple[str, str | None, str | None]) -> None:
        self.stats["flows_closed"] += 1
        for key in list(self._by_flow.get(flow_id, ())):
            run = self._runs.get(key)
            if run is not None:
                run.fence(f"flow {closed[0]}")
                if run.task is not None and not run.task.done():
                    run.task.cancel()
        self.emit("flowClosed", flow_id, status=closed[0], errorType=closed[1], errorMessage=closed[2])

    # ------------------------------------------------------------------ failure ----------
    async def _fail(self, run: AttemptRun, error_type: str, detail: str, at: float, *, outcome: str = "FAILED",
                    delay_override: float | None = None, fatal: bool = False) -> None:
        await self._commit_attempt(
            run,
            lambda tx: self._apply_failure(tx, run.row, self.owner, run.attempt, error_type, detail, at,
                                           outcome, delay_override, fatal),
            lambda result: self._after_failure(run.flow_id, run.seid, run.row["step_type"], run.attempt,
                                               error_type, detail, outcome, result))

    def _apply_failure(self, tx: Tx, row: dict[str, Any], owner: str | None, attempt: int, error_type: str,
                       detail: str, at: float, outcome: str, delay_override: float | None,
                       fatal: bool) -> dict[str, Any]:
        """Record a failed attempt; schedule the retry, or route/fail once exhausted."""
        opts = json.loads(row["options"])
        flow_id, seid = row["flow_id"], row["step_execution_id"]
        flow = tx.get_flow(flow_id)
        if flow is None or flow["status"] != "RUNNING":
            raise _Fenced()
        delay = delay_override if delay_override is not None else retry_delay(opts, attempt)
        max_attempts = opts["maximumAttempts"]
        attempts_left = max_attempts == 0 or attempt < max_attempts
        time_left = (at + delay) - row["scheduled_at"] < opts["totalDuration"]
        retry = not fatal and attempts_left and time_left
        where = {"lease_owner": owner, "attempt": attempt, "status": "RUNNING"}
        if retry:
            next_at = max(at + delay, self.clock.now())
            ok = tx.update_step(flow_id, seid, where=where, status="BACKOFF", next_attempt_at=next_at)
        else:
            ok = tx.update_step(flow_id, seid, where=where, status="FAILED", end_time=at)
        if not ok:
            raise _Fenced()
        tx.update_attempt(flow_id, seid, attempt, end_time=at, outcome=outcome, error_type=error_type,
                          detail=detail)
        result: dict[str, Any] = {"retry": retry}
        if retry:
            result.update(nextAttemptAt=next_at, delay=delay)
            return result
        why = "fatal" if fatal else ("attempts exhausted" if not attempts_left else "TotalDuration spent")
        recovery = opts.get("failureStep") if not fatal else None
        recovery_id = None
        now = at
        if recovery:
            definition = self.definition_for(flow["flow_type"], flow["flow_ref"])
            spec = definition.steps[recovery]
            rec_opts = opts.get("failureStepOptions") or resolve_options(
                spec.options(), definition, f"flow {definition.flow_type}, step {spec.step_type}")
            recovery_id = self._insert_step(tx, flow_id, flow["run_id"], spec, row["input"], rec_opts, seid, now,
                                            recovery_error={"detail": detail, "error_type": error_type}
                                            )["step_execution_id"]
        tx.add_event(flow_id, now, "StepExecuteFailed", {
            "stepExecutionId": seid, "fromStepExecutionId": row["from_step_execution_id"],
            "stepType": row["step_type"], "attempt": attempt, "errorType": error_type, "detail": detail,
            "reason": why, "recoveryStepExecutionId": recovery_id,
        })
        result.update(reason=why, recoveryStepExecutionId=recovery_id)
        if recovery_id is None:
            if fatal:
                closed = ("FAILED", "INVALID_USER_FLOW_CODE", f"{seid}: {detail}")
            else:
                closed = ("FAILED", "WORKER_API_FAILED",
                          f"{seid} failed after {attempt} attempt{'s' if attempt != 1 else ''} "
                          f"({why}): {error_type}: {detail}")
            self._close(tx, flow_id, now, *closed)
            result["closed"] = closed
        return result

    def _after_failure(self, flow_id: str, seid: str, step_type: str, attempt: int, error_type: str,
                       detail: str, outcome: str, result: dict[str, Any]) -> None:
        self.emit("attemptFailed", flow_id, stepExecutionId=seid, stepType=step_type, attempt=attempt,
                  errorType=error_type, detail=detail, outcome=outcome,
                  **{k: v for k, v in result.items() if k != "closed"})
        if "closed" in result:
            self._after_close(flow_id, result["closed"])
        self._poke()

    def _reap(self, now: float, flow_ids: list[str] | None) -> None:
        """Declare lost the attempts of other processes whose deadlines have passed."""
        rows = self.store.read(lambda tx: tx.expired_foreign_attempts(now, self.owner, flow_ids))
        for row in rows:
            at, kind = earliest_deadline(row["attempt_deadline"], row["heartbeat_deadline"], row["total_deadline"])
            opts = json.loads(row["options"])
            detail = timeout_detail(kind, opts)
            try:
                with self.store.tx() as tx:
                    fresh = tx.get_step(row["flow_id"], row["step_execution_id"])
                    if (fresh is None or fresh["status"] != "RUNNING" or fresh["attempt"] != row["attempt"]
                            or fresh["lease_owner"] != row["lease_owner"]):
                        continue
                    result = self._apply_failure(tx, fresh, fresh["lease_owner"], fresh["attempt"], kind,
                                                 detail, at, "LOST", None, False)
            except _Fenced:
                continue
            self.stats["transitions"] += 1
            self._after_failure(row["flow_id"], row["step_execution_id"], row["step_type"], row["attempt"],
                                kind, detail, "LOST", result)

    # ------------------------------------------------------------------ stopping ---------
    def stop_flow(self, flow_id: str, stop_type: str = "CANCEL", reason: str | None = None) -> None:
        status = {"CANCEL": "CANCELED", "TERMINATE": "TERMINATED", "FAIL": "FAILED"}[stop_type]
        error_type = "CLIENT_API_FAILED" if stop_type == "FAIL" else None
        now = self.clock.now()
        from dexcli.sdk.errors import FlowNotActiveOrNotFoundError

        with self.store.tx() as tx:
            flow = tx.get_flow(flow_id)
            if flow is None or flow["status"] != "RUNNING":
                state = "not found" if flow is None else f"already {flow['status']}"
                raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is {state}")
            self._close(tx, flow_id, now, status, error_type, reason or f"stopped ({stop_type.lower()})")
        self._after_close(flow_id, (status, error_type, reason))
        self._poke()
