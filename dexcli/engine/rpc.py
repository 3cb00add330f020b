"""RPCs: a client invokes a flow method; its effects commit atomically with its output.

The invoking process runs the handler (there is no separate worker locally): it reads a
snapshot (channel sizes, the pending messages the RPC loads), calls the handler under its
timeout, and commits in one transaction: its publishes and deletions, the step executions it
cancels, the steps it starts (from `__rpc/<name>`), RpcExecutionCompleted, and the waits its
publishes make ready. A handler that raises commits nothing; the caller gets
WorkerInvocationError with the exception's type and detail. A process driving the flow picks
the changes up on its next look at the database.

As on the server: an RPC that holds locks runs as a local activity, so a handler that raises
is run again (up to 3 attempts, 0.1 s then 0.2 s apart, within its one timeout, every attempt
on the same snapshot); one without locks runs once. An RPC without locks and without effects
sends the flow nothing, so it records no history event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dexcli.engine import handler_state as hs
from dexcli.engine.attributes import AttributeView, apply_writes
from dexcli.engine.definitions import Definitions
from dexcli.engine.outcome import error_identity, next_step
from dexcli.engine.transitions import NextStep, queue_step
from dexcli.engine.transitions import waiting as w
from dexcli.engine.transitions.continuing import when_due
from dexcli.sdk.channels import ChannelMessage, physical_name
from dexcli.sdk.codec import decode, encode, from_jsonable, to_jsonable
from dexcli.sdk.errors import (
    ChannelMessageNotFoundError,
    ChannelMessagesNotLoadedError,
    FlowCodeError,
    FlowEndedError,
    FlowNotActiveOrNotFoundError,
    InvalidStepResultError,
    RpcLockConflictError,
    ValueMappingError,
    WorkerInvocationError,
)
from dexcli.sdk.options import load_keys
from dexcli.sdk.options import lock_keys as sdk_lock_keys
from dexcli.sdk.registry import FlowDefinition
from dexcli.sdk.rpc import RPCInvokeOptions, RPCResult, RpcSpec
from dexcli.store import FlowRecord, Tx

if TYPE_CHECKING:
    from dexcli.engine.core import Engine

LOCK_GRACE_SECONDS = 5.0  # an RPC's locks outlive its timeout by this much if its process dies
LOCKED_ATTEMPTS = 3  # the server's maxWorkerRpcActivityAttempts
FIRST_BACKOFF = 0.1  # seconds, doubled after each attempt: the server's internal activity retry policy


@dataclass
class Snapshot:
    """What an RPC handler reads: the flow, its queues' sizes, the messages it loads."""

    flow: FlowRecord
    counts: dict[str, int]
    loaded: dict[str, list[tuple[str, str]]]  # queue -> [(message id, value JSON)]
    attributes: dict[str, str] = field(default_factory=dict)  # key -> JSON (plain, and loaded maps)
    loads: tuple[str, ...] = ()  # the AttributeMaps / instances loaded
    holder: str | None = None  # the lock holder id, when the RPC holds locks


@dataclass
class RpcContext:
    """The Context an RPC handler is given: no step execution, no heartbeat, no Stream."""

    definition: FlowDefinition
    snapshot: Snapshot
    rpc_name: str
    now: float
    effects: w.Effects = field(default_factory=w.Effects)

    def __post_init__(self) -> None:
        self.attrs = AttributeView(self.definition, self.snapshot.attributes, self.snapshot.loads)
        self.effects.attributes = self.attrs.writes

    def _get_attribute(self, attribute: Any, instance: str | None) -> Any:
        return self.attrs.get(attribute, instance)

    def _set_attribute(self, attribute: Any, instance: str | None, value: Any) -> None:
        self.attrs.set(attribute, instance, value)

    def _delete_attribute(self, attribute: Any, instance: str | None) -> None:
        self.attrs.delete(attribute, instance)

    def _attribute_map_keys(self, attribute: Any) -> list[str]:
        return self.attrs.map_keys(attribute)

    @property
    def flow_id(self) -> str:
        return self.snapshot.flow.flow_id

    @property
    def run_id(self) -> str:
        return self.snapshot.flow.run_id

    step_execution_id = ""
    from_step_execution_id = ""
    attempt = 1
    recovery_error = None

    @property
    def first_attempt_at(self) -> datetime:
        return datetime.fromtimestamp(int(self.now), tz=UTC)

    def has_last_heartbeat_value(self) -> bool:
        return False

    def get_last_heartbeat_value(self, value_type: Any = Any) -> Any:
        return None

    def has_timer_fired(self, index: int | None = None) -> bool:
        return False

    def wait_for_method_failed(self) -> bool:
        return False

    def _sub_flow_result(self, index: int) -> Any:  # SubFlow.get_condition_results in an RPC, as the SDK says
        raise ValueError("SubFlow results are available only during execute")

    _sub_flow_id = _sub_flow_result

    def is_cancellation_requested(self) -> bool:
        return False

    def set_step_execution_local(self, key: str, value: Any) -> None:
        raise FlowCodeError("step-execution locals belong to steps; an RPC has no step execution")

    def get_step_execution_local(self, key: str, value_type: Any = Any) -> Any:
        raise FlowCodeError("step-execution locals belong to steps; an RPC has no step execution")

    def record_event(self, name: str, value: Any) -> None:
        self.effects.events.append({"name": name, "value": json.loads(encode(value))})

    def _dex_stream_write(self, stream: Any, value: Any) -> None:
        raise FlowCodeError("RPC handlers cannot write to a Stream (a step can)")

    def _declared(self, channel: Any) -> Any:
        return hs.declared(self.definition.channels, channel, self.definition.flow_type, "channel")

    def _publish_channel(self, channel: Any, instance: str | None, value: Any) -> None:
        hs.publish(self.effects.publishes, self._declared(channel), instance, value)

    def _delete_channel_message(self, channel: Any, instance: str | None, message_id: str) -> None:
        self._declared(channel)
        self.effects.deletes.append(message_id)

    def _channel_size(self, channel: Any, instance: str | None) -> int:
        return self.snapshot.counts.get(physical_name(self._declared(channel).name, instance), 0)

    def _channel_map_keys(self, channel: Any) -> list[str]:
        return hs.map_instances(self.snapshot.counts, self._declared(channel).name)

    def _pending_channel_messages(self, channel: Any, instance: str | None) -> list[ChannelMessage[Any]]:
        declared = self._declared(channel)
        queue = physical_name(declared.name, instance)
        if queue not in self.snapshot.loaded:
            raise ChannelMessagesNotLoadedError(
                f"RPC {self.rpc_name} did not load {queue}: add it to @rpc(load_channels=...)")
        return [ChannelMessage(mid, decode(v, declared.value_type)) for mid, v in self.snapshot.loaded[queue]]

    def _channel_results(self, channel: Any, instance: str | None) -> list[Any]:
        return []  # an RPC consumes nothing


def loads(spec: RpcSpec) -> list[str]:
    """The queues whose pending messages the RPC loads."""
    names = [physical_name(c.name, None) for c in spec.options.load_channels]
    names += [load.physical_name for load in spec.options.load_channel_map_instances]
    return names


def lock_keys(spec: RpcSpec, options: RPCInvokeOptions | None) -> tuple[str, ...]:
    extra = options.lock_attribute_map_instances if options else ()
    return sdk_lock_keys(spec.options.lock_attributes + tuple(extra))


def attribute_loads(spec: RpcSpec, options: RPCInvokeOptions | None) -> tuple[str, ...]:
    extra = options.load_attribute_map_instances if options else ()
    return load_keys(spec.options.load_attribute_maps, spec.options.load_attribute_map_instances + tuple(extra))


def read_snapshot(tx: Tx, flow_id: str, spec: RpcSpec, options: RPCInvokeOptions | None = None,
                  now: float = 0.0) -> Snapshot:
    """What the handler reads, after taking the RPC's locks (in the same transaction, so a
    locked read sees the latest committed value). RpcLockConflictError if one is held."""
    flow = tx.get_flow(flow_id)
    if flow is None:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} not found")
    holder, keys = None, lock_keys(spec, options)
    if keys:
        if not flow.is_running:
            raise FlowEndedError(f"flow {flow_id} is {flow.status.value}: RPC {spec.name} takes locks")
        holder = f"rpc:{spec.name}:{uuid.uuid4().hex[:8]}"
        conflict = tx.try_locks(flow_id, keys, holder, now, now + spec.timeout + LOCK_GRACE_SECONDS)
        if conflict is not None:
            raise RpcLockConflictError(f"RPC {spec.name}: the lock on {conflict[0]} is held by {conflict[1]}")
    loaded: dict[str, list[tuple[str, str]]] = {q: [] for q in loads(spec)}
    for queue, mid, value in tx.pending_messages(flow_id):
        if queue in loaded:
            loaded[queue].append((mid, value))
    attr_loads = attribute_loads(spec, options)
    return Snapshot(flow, tx.queue_counts(flow_id), loaded, tx.attributes_of(flow_id, attr_loads), attr_loads, holder)


# ------------------------------------------------------------------------------ call --------
def decode_input(spec: RpcSpec, value: Any) -> Any:
    if not spec.has_input:
        return None
    try:
        return from_jsonable(to_jsonable(value), spec.input_type)
    except ValueMappingError as exc:
        raise ValueMappingError(f"input for RPC {spec.name}: {exc}") from None


def _invocation_error(spec: RpcSpec, exc: BaseException) -> WorkerInvocationError:
    etype, detail = error_identity(exc)
    return WorkerInvocationError(etype, detail)


def retry_delay(snapshot: Snapshot, attempt: int, elapsed: float, budget: float) -> float | None:
    """The pause before another attempt of a failed RPC call, or None for no other: only an RPC
    holding locks is retried, while the pause leaves time in its budget (its timeout)."""
    if snapshot.holder is None or attempt >= LOCKED_ATTEMPTS:
        return None
    delay = FIRST_BACKOFF * 2 ** (attempt - 1)
    return delay if elapsed + delay < budget else None


def call_sync(spec: RpcSpec, ctx: RpcContext, value: Any, timeout: float | None = None) -> Any:
    """Run the handler once on a thread of its own, under `timeout` (default: the RPC's)."""
    args = (ctx, value) if spec.has_input else (ctx,)

    def target() -> Any:
        if spec.is_async:
            return asyncio.run(spec.method(*args))
        return spec.method(*args)

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"dex-rpc-{spec.name}")
    try:
        return pool.submit(target).result(timeout=spec.timeout if timeout is None else timeout)
    except concurrent.futures.TimeoutError:
        raise WorkerInvocationError("TimeoutError", f"RPC {spec.name} did not return within "
                                                    f"{spec.timeout:g} s") from None
    except Exception as exc:
        raise _invocation_error(spec, exc) from exc
    finally:
        pool.shutdown(wait=False)


async def call_async(spec: RpcSpec, ctx: RpcContext, value: Any, timeout: float | None = None) -> Any:
    args = (ctx, value) if spec.has_input else (ctx,)
    timeout = spec.timeout if timeout is None else timeout
    try:
        if spec.is_async:
            return await asyncio.wait_for(spec.method(*args), timeout)
        # on the engine's loop, a handler thread it tracks: a time-skipping or virtual clock does
        # not jump (to the RPC's timeout) while sync code runs
        run_in_thread = getattr(asyncio.get_running_loop(), "run_in_thread", None)
        call = run_in_thread(spec.method, *args) if run_in_thread is not None else \
            asyncio.to_thread(spec.method, *args)
        return await asyncio.wait_for(call, timeout)
    except TimeoutError:
        raise WorkerInvocationError("TimeoutError", f"RPC {spec.name} did not return within "
                                                    f"{spec.timeout:g} s") from None
    except Exception as exc:
        raise _invocation_error(spec, exc) from exc


# ------------------------------------------------------------------------------ result ------
@dataclass(frozen=True, slots=True)
class Planned:
    """A handler's result, checked and encoded before anything is written."""

    output: Any  # the Python value returned to the caller
    output_json: Any  # JSON-ready, for history
    next_steps: tuple[NextStep, ...]
    cancels: frozenset[str]

    @property
    def has_effects(self) -> bool:
        return bool(self.next_steps or self.cancels)


def plan(spec: RpcSpec, result: Any, definition: FlowDefinition, definitions: Definitions) -> Planned:
    if result is None:
        return Planned(None, None, (), frozenset())
    if not isinstance(result, RPCResult):
        raise WorkerInvocationError("dex.InvalidStepResultError",
                                    f"RPC {spec.name} returned {type(result).__name__}, not RPCResult or None")
    try:
        output_json = to_jsonable(result.output)
        encode(output_json)
        steps = tuple(next_step(m, f"RPC {spec.name}", definition, definitions) for m in result.next_steps)
        cancels = frozenset(_step_type(cls, definition) for cls in result.canceling_steps)
    except (InvalidStepResultError, ValueMappingError) as exc:
        raise _invocation_error(spec, exc) from exc
    return Planned(result.output, output_json, steps, cancels)


def _step_type(cls: Any, definition: FlowDefinition) -> str:
    spec = definition.resolve(cls)
    if spec is None:
        raise InvalidStepResultError(f"{getattr(cls, '__name__', cls)} is not a registered step of "
                                     f"{definition.flow_type}")
    return spec.step_type


# ------------------------------------------------------------------------------ commit ------
@dataclass(frozen=True, slots=True)
class RpcApplied:
    canceled: tuple[str, ...]
    started: tuple[str, ...]
    woken: tuple[w.Woken, ...]


def commit(tx: Tx, spec: RpcSpec, flow_id: str, input_value: Any, ctx: RpcContext, planned: Planned,
           definitions: Definitions, now: float, transactional: bool) -> RpcApplied:
    """Apply the RPC's effects and record RpcExecutionCompleted, in the caller's transaction."""
    flow = tx.get_flow(flow_id)
    if flow is None:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is not found: RPC {spec.name} has effects to commit")
    if not flow.is_running:
        raise FlowEndedError(f"flow {flow_id} is {flow.status.value}: RPC {spec.name} has effects to commit")
    for mid in ctx.effects.deletes:
        if not tx.delete_message(flow_id, mid) and transactional:
            raise ChannelMessageNotFoundError(f"channel message {mid} no longer exists")
    ids = w.publish(tx, flow_id, ctx.effects.publishes, f"rpc:{spec.name}", now)
    upserts = apply_writes(tx, flow_id, ctx.effects.attributes, now) if ctx.effects.attributes else {}
    if ctx.snapshot.holder is not None:
        tx.release_locks(flow_id, ctx.snapshot.holder, now)
    canceled = w.cancel(tx, flow_id, set(planned.cancels), None, set(), set(), now) if planned.cancels else []
    started = []
    for nxt in planned.next_steps:
        numbers = tx.next_step_number(flow_id, nxt.spec.step_type)
        started.append(queue_step(tx, flow_id, nxt, f"__rpc/{spec.name}", now, numbers).step_execution_id)
    tx.add_event(flow_id, now, "RpcExecutionCompleted", {
        "rpcName": spec.name, "input": input_value, "output": planned.output_json,
        "publishes": [{"queue": q, "value": json.loads(v), "messageId": i}
                      for (q, v), i in zip(ctx.effects.publishes, ids, strict=True)],
        "deletes": ctx.effects.deletes, "nextSteps": started, "canceled": canceled,
        **({"recordEvents": ctx.effects.events} if ctx.effects.events else {}),
        **({"upsertAttributes": upserts} if upserts else {}),
    })
    woken = w.wake_flow(tx, flow_id, definitions, now, None) if ids else []
    if flow.flow_config is not None:  # its FlowConfig's threshold may roll the run over here
        when_due(tx, flow_id, now)
    return RpcApplied(tuple(canceled), tuple(started), tuple(woken))


# ------------------------------------------------------------------------------ invoke ------
def resolve(definitions: Definitions, target: Any, flow_id: str | None = None) -> tuple[FlowDefinition, RpcSpec]:
    """The registered RPC a bound method (`flow.approve`) names."""
    from dexcli.sdk.errors import FlowDefinitionError
    from dexcli.sdk.rpc import rpc_options

    flow = getattr(target, "__self__", None)
    options = rpc_options(getattr(target, "__func__", target))
    if flow is None or options is None:
        raise FlowDefinitionError(f"{getattr(target, '__name__', target)!r} is not an @rpc method of a flow instance")
    definition = definitions.registry.definition_of(flow)
    name = options.name or target.__name__
    spec = definition.rpcs.get(name)
    if spec is None:
        raise FlowDefinitionError(f"Flow {definition.flow_type} RPC is not registered: {name}")
    return definition, spec


def invoke(engine: Engine, definition: FlowDefinition, spec: RpcSpec, flow_id: str, value: Any,
           options: RPCInvokeOptions | None = None) -> Any:
    """Invoke an RPC from outside the engine's loop (a Client, `dex rpc`): snapshot (and
    locks), call, commit. Returns the handler's output."""
    decoded = decode_input(spec, value)
    with engine.store.tx() as tx:
        snapshot = read_snapshot(tx, flow_id, spec, options, engine.fresh_now(flow_id))
    try:
        began, attempt = time.monotonic(), 1
        while True:
            ctx = _context(snapshot, definition, flow_id, spec, engine.fresh_now(flow_id))
            try:
                left = spec.timeout - (time.monotonic() - began)
                planned = plan(spec, call_sync(spec, ctx, decoded, left), definition, engine.definitions)
                break
            except WorkerInvocationError:
                delay = retry_delay(snapshot, attempt, time.monotonic() - began, spec.timeout)
                if delay is None:
                    raise
                time.sleep(delay)  # the invoking thread's own wait, as the server's local activity
                attempt += 1
        if _read_only(snapshot, ctx, planned):
            return planned.output
        with engine.store.tx() as tx:
            applied = commit(tx, spec, flow_id, to_jsonable(decoded), ctx, planned, engine.definitions,
                             ctx.now, spec.options.is_transactional)
    except BaseException:
        _unlock(engine, flow_id, snapshot)
        raise
    engine.drives.on_loop(lambda: after(engine, flow_id, spec, applied))  # a step's client: on run()'s loop
    return planned.output


async def invoke_async(engine: Engine, definition: FlowDefinition, spec: RpcSpec, flow_id: str, value: Any,
                       options: RPCInvokeOptions | None = None) -> Any:
    """`invoke` for code on the engine's loop: the commit joins the group commit."""
    from dexcli.engine.batch import Unit

    decoded = decode_input(spec, value)
    with engine.store.tx() as tx:
        snapshot = read_snapshot(tx, flow_id, spec, options, engine.fresh_now(flow_id))
    loop = asyncio.get_running_loop()
    try:
        began, attempt = loop.time(), 1
        while True:
            ctx = _context(snapshot, definition, flow_id, spec, engine.fresh_now(flow_id))
            try:
                left = spec.timeout - (loop.time() - began)
                planned = plan(spec, await call_async(spec, ctx, decoded, left), definition, engine.definitions)
                break
            except WorkerInvocationError:
                delay = retry_delay(snapshot, attempt, loop.time() - began, spec.timeout)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                attempt += 1
        if _read_only(snapshot, ctx, planned):
            return planned.output
        await engine.commits.submit(Unit(
            lambda tx: commit(tx, spec, flow_id, to_jsonable(decoded), ctx, planned, engine.definitions,
                              ctx.now, spec.options.is_transactional),
            lambda applied: after(engine, flow_id, spec, applied)))
    except BaseException:
        _unlock(engine, flow_id, snapshot)
        raise
    return planned.output


def _context(snapshot: Snapshot, definition: FlowDefinition, flow_id: str, spec: RpcSpec, now: float) -> RpcContext:
    _check_flow(snapshot, definition, flow_id)
    return RpcContext(definition, snapshot, spec.name, now)


def _read_only(snapshot: Snapshot, ctx: RpcContext, planned: Planned) -> bool:
    """Nothing to commit: no locks to release and no effects. The server sends such an RPC's
    flow no signal (so it has no history event), and serves it from a closed run too."""
    return snapshot.holder is None and ctx.effects.empty and not planned.has_effects


def _unlock(engine: Engine, flow_id: str, snapshot: Snapshot) -> None:
    """The RPC failed: free its locks (its effects were not committed)."""
    if snapshot.holder is not None:
        with engine.store.tx() as tx:
            tx.release_locks(flow_id, snapshot.holder, engine.now())


def _check_flow(snapshot: Snapshot, definition: FlowDefinition, flow_id: str) -> None:
    if snapshot.flow.flow_type != definition.flow_type:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is a {snapshot.flow.flow_type}, "
                                           f"not a {definition.flow_type}")


def after(engine: Engine, flow_id: str, spec: RpcSpec, applied: RpcApplied) -> None:
    """After COMMIT: report, stop cancelled attempts running here, let the loop look again."""
    engine.emit("rpcCompleted", flow_id, rpcName=spec.name, nextSteps=list(applied.started),
                canceled=list(applied.canceled))
    engine.endings.fence_steps(flow_id, applied.canceled, f"cancelled by RPC {spec.name}")
    engine.endings.after_woken(flow_id, applied.woken)
    engine.wake()
