"""A flow retry policy as dex stores and shows it (StartFlowOptions / SubFlowOptions
`retry_policy`): checked and resolved with the server's defaults at start (`policy_json`), the
backoff rule (`delay_after`), and a run's place among its retries (`attempt_of`,
`first_run_of`, `describe` for inspect). Read-only: the retry itself, a state change, is
`transitions/flow_retry.py`. Imports nothing of the engine, so the read-only views (`dex list`)
load it without the engine's transitions (and without the SDK's options, which only a start and a
retry read)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dexcli.store import FlowRecord, FlowState

if TYPE_CHECKING:
    from dexcli.sdk.options import RetryPolicy

IN_PROGRESS, EXHAUSTED = "IN_PROGRESS", "MAXIMUM_ATTEMPTS_REACHED"


def policy_json(policy: RetryPolicy | None, where: str) -> str | None:
    """A start's flow retry policy with the server's defaults filled in, as stored (None: none).
    What Dex would refuse, or not apply, is refused here (ValueError / TypeError)."""
    if policy is None:
        return None
    from dexcli.sdk.options import (
        DEFAULT_BACKOFF_COEFFICIENT,
        DEFAULT_INITIAL_INTERVAL,
        DEFAULT_MAXIMUM_INTERVAL,
        RetryPolicy,
        retry_problems,
    )

    if not isinstance(policy, RetryPolicy):
        raise TypeError(f"{where}(retry_policy=...) takes a RetryPolicy, not {type(policy).__name__}")
    if policy.total_duration is not None:
        raise ValueError(f"{where}(retry_policy=...): a flow retry policy has no total_duration (Dex's "
                         "FlowRetryPolicy has none; the official SDK drops it): bound it with maximum_attempts")
    if policy.maximum_attempts < 0:
        raise ValueError(f"{where}(retry_policy=...): maximum_attempts must not be negative")
    problems = retry_problems(policy, f"{where}.retry_policy")
    if problems:
        raise ValueError(problems[0])
    return json.dumps({
        "initialInterval": (policy.initial_interval or DEFAULT_INITIAL_INTERVAL).total_seconds(),
        "backoffCoefficient": policy.backoff_coefficient or DEFAULT_BACKOFF_COEFFICIENT,
        "maximumInterval": (policy.maximum_interval or DEFAULT_MAXIMUM_INTERVAL).total_seconds(),
        "maximumAttempts": policy.maximum_attempts})


def attempt_of(flow: FlowRecord) -> int:
    """Which run of its retries this is (1: the first)."""
    return int(json.loads(flow.retry)["attempt"]) if flow.retry else 1


def first_run_of(flow: FlowRecord) -> str:
    """The run id of the first run of its retries (a SubFlow parent's Wait names that one)."""
    return str(json.loads(flow.retry)["firstRunId"]) if flow.retry else flow.run_id


def delay_after(policy: dict[str, Any], attempt: int) -> float:
    """Seconds between run `attempt` failing and the next run beginning."""
    from dexcli.sdk.options import backoff_delay

    return backoff_delay(float(policy["initialInterval"]), float(policy["backoffCoefficient"]),
                         float(policy["maximumInterval"]), attempt)


def describe(flow: FlowRecord) -> dict[str, Any] | None:
    """The run's retry policy and place among its retries, as inspect shows them (None: no policy)."""
    if flow.retry_policy is None and flow.retry is None:
        return None
    policy = json.loads(flow.retry_policy) if flow.retry_policy else None
    out: dict[str, Any] = {"attempt": attempt_of(flow), "firstRunId": first_run_of(flow)}
    if policy is not None:
        out["retryPolicy"] = policy  # seconds, as `timeout` and `startDelay` are
    if flow.retry:
        out["previousRunId"] = json.loads(flow.retry)["previousRunId"]
    if flow.status is FlowState.FAILED and policy is not None:
        limit = int(policy["maximumAttempts"])
        out["retryState"] = EXHAUSTED if limit and attempt_of(flow) >= limit else IN_PROGRESS
    return out
