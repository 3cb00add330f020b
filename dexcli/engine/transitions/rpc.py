"""The state changes of an RPC: its locks taken and freed, and its effects committed with its
output. Like dexcli.engine.transitions: functions over one transaction that take facts and
`now` and return records; dexcli.engine.rpc runs the handler and acts after COMMIT.

    take_locks    the RPC's locks, in the transaction that reads its snapshot (RpcLockConflictError)
    free_locks    a failed RPC's locks (nothing of it was committed)
    commit_rpc    its deletions, publishes, attribute writes, cancellations and next steps,
                  RpcExecutionCompleted, and the waits its publishes make ready
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from dexcli.engine.attributes import apply_writes
from dexcli.engine.definitions import Definitions
from dexcli.engine.transitions import waiting as w
from dexcli.engine.transitions.continuing import when_due
from dexcli.engine.transitions.steps import NextStep, queue_step
from dexcli.sdk.errors import (
    ChannelMessageNotFoundError,
    FlowEndedError,
    FlowNotActiveOrNotFoundError,
    RpcLockConflictError,
)
from dexcli.store import FlowRecord, Tx

LOCK_GRACE_SECONDS = 5.0  # an RPC's locks outlive its timeout by this much if its process dies


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


@dataclass(frozen=True, slots=True)
class RpcApplied:
    canceled: tuple[str, ...]
    started: tuple[str, ...]
    woken: tuple[w.Woken, ...]


def take_locks(tx: Tx, flow: FlowRecord, rpc_name: str, keys: tuple[str, ...], timeout: float,
               now: float) -> str:
    """Take an RPC's locks on a running flow; returns the holder id. RpcLockConflictError if
    one is held, FlowEndedError if the flow has closed."""
    if not flow.is_running:
        raise FlowEndedError(f"flow {flow.flow_id} is {flow.status.value}: RPC {rpc_name} takes locks")
    holder = f"rpc:{rpc_name}:{uuid.uuid4().hex[:8]}"
    conflict = tx.try_locks(flow.flow_id, keys, holder, now, now + timeout + LOCK_GRACE_SECONDS)
    if conflict is not None:
        raise RpcLockConflictError(f"RPC {rpc_name}: the lock on {conflict[0]} is held by {conflict[1]}")
    return holder


def free_locks(tx: Tx, flow_id: str, holder: str, now: float) -> None:
    """A failed RPC's locks, freed (its effects were not committed)."""
    tx.release_locks(flow_id, holder, now)


def commit_rpc(tx: Tx, rpc_name: str, flow_id: str, input_value: Any, effects: w.Effects, holder: str | None,
               planned: Planned, definitions: Definitions, now: float, transactional: bool) -> RpcApplied:
    """Apply the RPC's effects and record RpcExecutionCompleted, in the caller's transaction."""
    flow = tx.get_flow(flow_id)
    if flow is None:
        raise FlowNotActiveOrNotFoundError(f"flow {flow_id} is not found: RPC {rpc_name} has effects to commit")
    if not flow.is_running:
        raise FlowEndedError(f"flow {flow_id} is {flow.status.value}: RPC {rpc_name} has effects to commit")
    for mid in effects.deletes:
        if not tx.delete_message(flow_id, mid) and transactional:
            raise ChannelMessageNotFoundError(f"channel message {mid} no longer exists")
    ids = w.publish(tx, flow_id, effects.publishes, f"rpc:{rpc_name}", now)
    upserts = apply_writes(tx, flow_id, effects.attributes, now) if effects.attributes else {}
    if holder is not None:
        tx.release_locks(flow_id, holder, now)
    canceled = w.cancel(tx, flow_id, set(planned.cancels), None, set(), set(), now) if planned.cancels else []
    started = []
    for nxt in planned.next_steps:
        numbers = tx.next_step_number(flow_id, nxt.spec.step_type)
        started.append(queue_step(tx, flow_id, nxt, f"__rpc/{rpc_name}", now, numbers).step_execution_id)
    tx.add_event(flow_id, now, "RpcExecutionCompleted", {
        "rpcName": rpc_name, "input": input_value, "output": planned.output_json,
        "publishes": [{"queue": q, "value": json.loads(v), "messageId": i}
                      for (q, v), i in zip(effects.publishes, ids, strict=True)],
        "deletes": effects.deletes, "nextSteps": started, "canceled": canceled,
        **({"recordEvents": effects.events} if effects.events else {}),
        **({"upsertAttributes": upserts} if upserts else {}),
    })
    woken = w.wake_flow(tx, flow_id, definitions, now, None) if ids else []
    if flow.flow_config is not None:  # its FlowConfig's threshold may roll the run over here
        when_due(tx, flow_id, now)
    return RpcApplied(tuple(canceled), tuple(started), tuple(woken))
