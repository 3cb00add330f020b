"""Flow statuses, results and client-side options (Dex names)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dexcli.sdk.codec import from_jsonable


class FlowStatus(str, enum.Enum):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"
    TERMINATED = "TERMINATED"
    CONTINUED_AS_NEW = "CONTINUED_AS_NEW"

    @property
    def is_terminal(self) -> bool:
        return self not in (FlowStatus.RUNNING, FlowStatus.CONTINUED_AS_NEW)


class FlowErrorType(str, enum.Enum):
    STEP_DECISION_FAILED = "STEP_DECISION_FAILED"
    CLIENT_API_FAILED = "CLIENT_API_FAILED"
    WORKER_API_FAILED = "WORKER_API_FAILED"
    INVALID_USER_FLOW_CODE = "INVALID_USER_FLOW_CODE"
    FLOW_TIMEOUT = "FLOW_TIMEOUT"
    INTERNAL = "INTERNAL"


@dataclass(frozen=True)
class StepCompletion:
    step_type: str
    step_execution_id: str
    output: Any  # plain JSON data

    def decode(self, value_type: Any = Any) -> Any:
        return from_jsonable(self.output, value_type)


@dataclass(frozen=True)
class FlowResult:
    status: FlowStatus
    completions: tuple[StepCompletion, ...] = ()
    error_type: FlowErrorType | None = None
    error_message: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status.is_terminal

    def single_output(self, value_type: Any = Any) -> Any:
        if not self.is_terminal or len(self.completions) != 1:
            raise ValueError(
                f"single_output needs a finished flow with exactly one completion; "
                f"status {self.status.value}, {len(self.completions)} completions"
            )
        return self.completions[0].decode(value_type)


@dataclass(frozen=True)
class FlowInfo:
    flow_id: str
    run_id: str
    flow_type: str
    status: FlowStatus
    started_at: datetime


class IdReusePolicy(enum.Enum):
    DEFAULT = "DEFAULT"
    ALLOW_IF_PREVIOUS_FAILED = "ALLOW_IF_PREVIOUS_FAILED"
    ALLOW_IF_NOT_RUNNING = "ALLOW_IF_NOT_RUNNING"
    ALLOW_TERMINATE_IF_RUNNING = "ALLOW_TERMINATE_IF_RUNNING"
    DISALLOW = "DISALLOW"


@dataclass(frozen=True)
class StartFlowOptions:
    timeout: timedelta | None = None
    start_delay: timedelta | None = None
    id_reuse_policy: IdReusePolicy = IdReusePolicy.DEFAULT
    ignore_already_started: bool = False
    request_id: str | None = None


class StopType(enum.Enum):
    CANCEL = "CANCEL"
    TERMINATE = "TERMINATE"
    FAIL = "FAIL"


@dataclass(frozen=True)
class StopFlowOptions:
    type: StopType = StopType.CANCEL
    reason: str | None = None
