"""Flow statuses, results and client-side options (Dex names).

Enum members and values are the official SDK's (`FlowStatus("completed")`, lower-case values,
plain Enums). The store keeps its own upper-case states (dexcli.store.records): the client maps
them to these by member name, and the CLI and `dex inspect --json` show the upper-case names.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from dexcli.sdk.codec import from_jsonable
from dexcli.sdk.flow_config import FlowConfig
from dexcli.sdk.options import RetryPolicy, StepDurability, StepOptions


class FlowStatus(enum.Enum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    TERMINATED = "terminated"
    SERVER_SIDE_TIMEOUT_INTERNAL_ONLY = "server_side_timeout_internal_only"  # reserved by Dex; dex never reports it
    CONTINUED_AS_NEW = "continued_as_new"

    @property
    def is_terminal(self) -> bool:
        return self not in (FlowStatus.RUNNING, FlowStatus.CONTINUED_AS_NEW)


class FlowErrorType(enum.Enum):
    STEP_DECISION_FAILED = "step_decision_failed"
    CLIENT_API_FAILED = "client_api_failed"
    WORKER_API_FAILED = "worker_api_failed"
    INVALID_USER_FLOW_CODE = "invalid_user_flow_code"
    INTERNAL = "internal"
    FLOW_TIMEOUT = "flow_timeout"


@dataclass(frozen=True)
class HealthInfo:
    """A health check's answer: the service's condition ("OK"), the host that answered, and how
    long the check took, in whole seconds."""

    condition: str
    hostname: str
    duration_seconds: int


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
                f"status {self.status.name}, {len(self.completions)} completions"
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
    DEFAULT = "default"
    ALLOW_IF_PREVIOUS_FAILED = "allow_if_previous_failed"
    ALLOW_IF_NOT_RUNNING = "allow_if_not_running"
    ALLOW_TERMINATE_IF_RUNNING = "allow_terminate_if_running"
    DISALLOW = "disallow"


class FlowTimeoutPolicy(enum.Enum):
    """What happens when a positive flow timeout expires (the official SDK's members).

    DEFAULT: HANDLER when the flow overrides `handle_timeout`, else FAIL. FAIL: the flow
    fails with FLOW_TIMEOUT. CANCEL: the flow ends CANCELED. HANDLER: `handle_timeout` runs
    once (with retries) and its decision is applied like an execute's.
    """

    DEFAULT = "default"
    FAIL = "fail"
    CANCEL = "cancel"
    HANDLER = "handler"


@dataclass(frozen=True)
class FlowTimeoutHandlerOptions:
    """How `Flow.handle_timeout` runs under the HANDLER policy (the official SDK's fields).

    dex applies method_timeout, heartbeat_timeout, retry and on_failure_proceed_to; a start
    with durability=ASYNC, lock_attributes or load_* is refused (dex does not run them yet).
    """

    method_timeout: timedelta | None = None
    heartbeat_timeout: timedelta | None = None
    retry: RetryPolicy | None = None
    durability: StepDurability = StepDurability.DEFAULT
    lock_attributes: tuple[Any, ...] = ()
    load_attribute_maps: tuple[Any, ...] = ()
    load_attribute_map_instances: tuple[Any, ...] = ()
    load_channels: tuple[Any, ...] = ()
    load_channel_maps: tuple[Any, ...] = ()
    load_channel_map_instances: tuple[Any, ...] = ()
    _failure_target: Any = None
    _failure_options: StepOptions | None = None

    def on_failure_proceed_to(self, step: type[Any], options: StepOptions | None = None
                              ) -> FlowTimeoutHandlerOptions:
        """A copy whose exhausted handler moves to the registered no-input Step `step`."""
        return replace(self, _failure_target=step, _failure_options=options)


@dataclass(frozen=True)
class StartFlowOptions:
    timeout: timedelta | None = None
    timeout_policy: FlowTimeoutPolicy = FlowTimeoutPolicy.DEFAULT
    timeout_handler_options: FlowTimeoutHandlerOptions | None = None
    start_delay: timedelta | None = None
    id_reuse_policy: IdReusePolicy = IdReusePolicy.DEFAULT
    retry_policy: RetryPolicy | None = None  # a FAILED run starts again (dexcli.engine.transitions.flow_retry)
    ignore_already_started: bool = False
    request_id: str | None = None
    config_override: FlowConfig | None = None  # applied over dex's defaults (dexcli.engine.flow_config)
    # (Attribute or AttributeMap, instance or None, value), in the order given: with_attribute
    _attribute_initializations: tuple[tuple[Any, str | None, Any], ...] = field(default=(), repr=False)

    def with_attribute(self, attribute: Any, /, *args: object) -> StartFlowOptions:
        """A copy with one initial attribute value: `(attribute, value)`, or
        `(attribute_map, instance, value)` for an AttributeMap."""
        from dexcli.sdk.attributes import initialization

        init = initialization(attribute, args)
        return dataclasses.replace(self, _attribute_initializations=self._attribute_initializations + (init,))

    @property
    def attribute_initializations(self) -> tuple[tuple[Any, str | None, Any], ...]:
        return self._attribute_initializations


class StopType(enum.Enum):
    CANCEL = "cancel"
    TERMINATE = "terminate"
    FAIL = "fail"


@dataclass(frozen=True)
class StopFlowOptions:
    type: StopType = StopType.CANCEL
    reason: str | None = None


class TimeTravelType(enum.Enum):
    """Where in a flow's history time travel starts its new run (the official SDK's members)."""

    BEGINNING = "beginning"  # the flow's start
    HISTORY_EVENT_TIME = "history_event_time"  # the first event at or after a time
    STEP_TYPE = "step_type"  # the latest execution of a step type
    STEP_EXECUTION_ID = "step_execution_id"  # one step execution (with a step method)


class TimeTravelStepMethod(enum.Enum):
    """Which method of the chosen step execution the new run runs again."""

    WAIT_FOR = "wait_for"  # its wait_for and everything after it
    EXECUTE = "execute"  # its wait_for's result kept; its execute and everything after it


@dataclass(frozen=True)
class TimeTravelOptions:
    """Client.time_travel's options: the point (`type` and its one selector), a reason, and
    whether the RPCs that came after the point are left out of the new run."""

    type: TimeTravelType
    history_event_time: datetime | None = None
    step_type: str | None = None
    step_execution_id: str | None = None
    step_method: TimeTravelStepMethod | None = None
    reason: str | None = None
    skip_writes_reapply: bool = False
