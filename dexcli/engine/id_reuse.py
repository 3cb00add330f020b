"""Whether a start may take a flow id that already has a run (IdReusePolicy, as Dex):

    policy                       existing run RUNNING          existing run closed
    DEFAULT, DISALLOW            refuse                        refuse
    ALLOW_IF_PREVIOUS_FAILED     refuse                        new run if it ended FAILED, CANCELED or TERMINATED
    ALLOW_IF_NOT_RUNNING         refuse                        new run
    ALLOW_TERMINATE_IF_RUNNING   TERMINATED, then a new run    new run

A refused start raises FlowAlreadyStartedError, unless ignore_already_started is set and its
request id is the existing run's: then it answers with that run. A new run takes the flow id;
the previous run is kept under `<flow_id>$<run_id>` (dexcli.store.tx_runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from dexcli.engine.transitions import Closed, close
from dexcli.sdk.errors import FlowAlreadyStartedError
from dexcli.store import FlowRecord, FlowState, Tx

_UNSUCCESSFUL = frozenset({FlowState.FAILED, FlowState.CANCELED, FlowState.TERMINATED})


def allows(policy: str, existing: FlowRecord) -> bool:
    """Whether `policy` (an IdReusePolicy name) lets a new run replace `existing`."""
    if policy == "ALLOW_TERMINATE_IF_RUNNING":
        return True
    if existing.is_running:
        return False
    if policy == "ALLOW_IF_NOT_RUNNING":
        return True
    return policy == "ALLOW_IF_PREVIOUS_FAILED" and existing.status in _UNSUCCESSFUL


@dataclass(frozen=True, slots=True)
class Reused:
    """The flow id is free for a new run: the previous run (archived under `archived_as`),
    and how it closed when this start terminated it."""

    previous_run_id: str
    archived_as: str
    terminated: Closed | None


def make_room(tx: Tx, existing: FlowRecord, policy: str, new_run_id: str, now: float) -> Reused:
    """Terminate the existing run if the policy says so, and archive it. Raises
    FlowAlreadyStartedError when the policy refuses (nothing is written then)."""
    if not allows(policy, existing):
        raise FlowAlreadyStartedError(
            f"flow {existing.flow_id} already exists ({existing.status.value}, {existing.flow_type}); "
            f"id reuse policy {policy} refuses a new run")
    terminated = None
    if existing.is_running:
        terminated = Closed(FlowState.TERMINATED, None, f"terminated: run {new_run_id} took the flow id "
                                                         "(ALLOW_TERMINATE_IF_RUNNING)")
        close(tx, existing.flow_id, now, terminated)
    archived = tx.archive_run(existing.flow_id, existing.run_id)
    return Reused(existing.run_id, archived, terminated)
