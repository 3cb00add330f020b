"""A flow's timeout fires (StartFlowOptions.timeout, as dexcli.engine.flow_timeout resolved and
stored it): FlowTimedOut, then the flow closes (FAIL, CANCEL) or its `sys:timeout_handler` step
is queued (HANDLER)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dexcli.engine.definitions import Definitions
from dexcli.engine.timeout_step import TIMEOUT_STEP, timeout_handler_spec
from dexcli.engine.transitions.flows import close
from dexcli.engine.transitions.steps import Closed, NextStep, queue_step
from dexcli.sdk.errors import DexError
from dexcli.sdk.options import ResolvedOptions, StepOptions
from dexcli.store import FlowState, StepRecord, Tx

TIMEOUT_SOURCE = "__timeout__"  # the handler step's from_step_execution_id


@dataclass(frozen=True, slots=True)
class TimedOut:
    """A flow's timeout fired: how it closed (FAIL, CANCEL), or the handler step queued (HANDLER)."""

    flow_id: str
    policy: str
    closed: Closed | None
    handler: StepRecord | None


def flow_timeout(tx: Tx, flow_id: str, now: float, definitions: Definitions) -> TimedOut | None:
    """Fire the flow's timeout if it is due and has not fired; None otherwise (or when the
    flow's code cannot be loaded here for its handler: then the flow is unloadable)."""
    flow = tx.get_flow(flow_id)
    if flow is None or not flow.is_running or flow.timeout_at is None or flow.timeout_at > now:
        return None
    policy = flow.timeout_policy or "FAIL"
    handler: tuple[Any, ResolvedOptions] | None = None
    if policy == "HANDLER":
        try:
            definition = definitions.get(flow.flow_type, flow.flow_ref)
        except DexError as exc:
            definitions.unloadable[flow_id] = str(exc)
            return None
        spec = timeout_handler_spec(definition)
        if spec is None:
            definitions.unloadable[flow_id] = f"flow {flow.flow_type} no longer has a handle_timeout"
            return None
        opts = ResolvedOptions.from_json(flow.timeout_handler_options) if flow.timeout_handler_options \
            else definitions.options(definition, spec, StepOptions())
        handler = (spec, opts)
    if not tx.take_flow_timeout(flow_id):
        return None
    message = f"Flow timed out after {flow.timeout or 0:g} seconds"
    tx.add_event(flow_id, now, "FlowTimedOut", {"timeout": flow.timeout, "timeoutPolicy": policy,
                                                "message": message})
    if handler is not None:
        numbers = tx.next_step_number(flow_id, TIMEOUT_STEP)
        step = queue_step(tx, flow_id, NextStep(handler[0], "null", handler[1]), TIMEOUT_SOURCE, now, numbers)
        return TimedOut(flow_id, policy, None, step)
    closed = Closed(FlowState.FAILED, "FLOW_TIMEOUT", message) if policy == "FAIL" \
        else Closed(FlowState.CANCELED, None, message)
    close(tx, flow_id, now, closed)
    return TimedOut(flow_id, policy, closed, None)


def fire_due(tx: Tx, now: float, flow_ids: list[str] | None, definitions: Definitions) -> list[TimedOut]:
    """Fire every flow timeout among `flow_ids` (None: all flows) due by real time `now`, each
    at its flow's own clock."""
    fired = (flow_timeout(tx, fid, now + offset, definitions) for fid, offset in tx.due_flow_timeouts(now, flow_ids))
    return [x for x in fired if x is not None]
