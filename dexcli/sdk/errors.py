"""Errors a flow author or a client can see. One base class; the CLI exits with each one's
`exit_code`, in the scheme `dex --help` documents: 1 the flow's own failure (a handler raised,
a wait timed out), 2 usage or bad input, 3 not found, 4 exists but closed or not in a state for
that (a conflict)."""

from __future__ import annotations

import enum
from typing import Any


class ErrorSubStatus(enum.Enum):
    """Which kind of failure a DexServiceError is, finer than its class (the official SDK's
    members and values). Every DexServiceError dex raises carries one as `sub_status`."""

    UNCATEGORIZED = "uncategorized"
    FLOW_ALREADY_STARTED = "flow_already_started"
    FLOW_NOT_EXISTS = "flow_not_exists"
    WORKER_API_ERROR = "worker_api_error"
    LONG_POLL_TIMEOUT = "long_poll_timeout"
    CHANNEL_MESSAGE_NOT_FOUND = "channel_message_not_found"
    REQUEST_TIMEOUT = "request_timeout"
    FLOW_CLOSING = "flow_closing"


class StatusCode(enum.Enum):
    """The gRPC status codes, as `grpc.StatusCode` names and values them: what a DexServiceError's
    `code` is (dex speaks no gRPC and does not import grpc). A member equals the `grpc.StatusCode`
    member of its name and hashes as it does, so `error.code == grpc.StatusCode.NOT_FOUND`, `in`
    a tuple of grpc codes and dict lookups work as they do on the official SDK's errors; only
    `is` against a grpc member differs."""

    OK = (0, "ok")
    CANCELLED = (1, "cancelled")
    UNKNOWN = (2, "unknown")
    INVALID_ARGUMENT = (3, "invalid argument")
    DEADLINE_EXCEEDED = (4, "deadline exceeded")
    NOT_FOUND = (5, "not found")
    ALREADY_EXISTS = (6, "already exists")
    PERMISSION_DENIED = (7, "permission denied")
    RESOURCE_EXHAUSTED = (8, "resource exhausted")
    FAILED_PRECONDITION = (9, "failed precondition")
    ABORTED = (10, "aborted")
    OUT_OF_RANGE = (11, "out of range")
    UNIMPLEMENTED = (12, "unimplemented")
    INTERNAL = (13, "internal")
    UNAVAILABLE = (14, "unavailable")
    DATA_LOSS = (15, "data loss")
    UNAUTHENTICATED = (16, "unauthenticated")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StatusCode):
            return self is other
        return (type(other).__name__ == "StatusCode" and getattr(other, "name", None) == self.name
                and getattr(other, "value", None) == self.value)

    def __hash__(self) -> int:
        return hash(self._name_)  # as enum.Enum hashes: grpc.StatusCode's members hash so too

    @classmethod
    def of(cls, code: Any) -> StatusCode:
        """This enum's member for a code given as grpc's member or as one of these."""
        return code if isinstance(code, StatusCode) else cls[code.name]


class DexError(Exception):
    """Base of every error dex raises on purpose. `exit_code` is what the CLI exits with."""

    exit_code = 1


class FlowDefinitionError(DexError):
    """A flow or step definition is invalid. Raised at registration, before anything runs."""

    exit_code = 2

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("; ".join(self.problems))


class ValueMappingError(DexError):
    """A value could not be encoded to JSON or decoded into the requested type."""

    exit_code = 2


class InvalidStepResultError(DexError):
    """A handler returned something that is not a valid StepDecision."""


class DexServiceError(DexError):
    """Base for errors the (local) Dex service reports to a client, with the official SDK's
    fields: `code` the gRPC status the server would answer with (a StatusCode; each class has
    its own, `grpc_code`), `sub_status` the Dex classification (each class has its own),
    `detail` the message, `operation` the Client method that failed (e.g. "start_flow") and
    `flow_id` the flow it targeted (None for service-wide calls, and for an error raised outside
    a Client call: a flow's own code, the CLI). The Client fills in `operation` and `flow_id`.

    Made as dex makes them, `DexServiceError(detail)`, or as the official SDK does,
    `DexServiceError(code, sub_status, detail, operation, flow_id)` (code: a StatusCode or
    grpc's member of that name)."""

    sub_status = ErrorSubStatus.UNCATEGORIZED
    grpc_code = StatusCode.UNKNOWN  # the class's `code` when none is given

    def __init__(self, *args: Any, code: Any = None, operation: str | None = None,
                 flow_id: str | None = None) -> None:
        if len(args) == 5 and isinstance(args[1], ErrorSubStatus):  # the official SDK's form
            code, self.sub_status, detail, operation, flow_id = args
            args = (detail,)
        super().__init__(*args)
        self.code = type(self).grpc_code if code is None else StatusCode.of(code)
        self.operation = operation
        self.flow_id = flow_id

    @property
    def detail(self) -> str:
        return str(self)

    def located(self, operation: str, flow_id: str | None) -> None:
        """Name the Client call it came out of, where it names none yet (dexcli.client)."""
        if self.operation is None:
            self.operation = operation
            if self.flow_id is None:
                self.flow_id = flow_id


class FlowAlreadyStartedError(DexServiceError):
    exit_code = 4
    sub_status = ErrorSubStatus.FLOW_ALREADY_STARTED
    grpc_code = StatusCode.ALREADY_EXISTS


class FlowNotFoundError(DexServiceError):
    exit_code = 3
    sub_status = ErrorSubStatus.FLOW_NOT_EXISTS
    grpc_code = StatusCode.NOT_FOUND


class FlowNotActiveOrNotFoundError(DexServiceError):
    exit_code = 3
    sub_status = ErrorSubStatus.FLOW_NOT_EXISTS
    grpc_code = StatusCode.NOT_FOUND


class FlowEndedError(FlowNotActiveOrNotFoundError):
    """The flow exists but has closed (COMPLETED, FAILED, ...): it takes no stop, timer skip or
    RPC effects. What every command exits with for a closed flow: 4, as for a conflict."""

    exit_code = 4


class TimeTravelPointError(DexServiceError):
    """Client.time_travel named a point its run's history does not have (no such step
    execution or step type, no event at or after that time), or one the flow's code can no
    longer run from: the server's INVALID_ARGUMENT, a DexServiceError. Bad input: exit 2."""

    exit_code = 2
    grpc_code = StatusCode.INVALID_ARGUMENT


class LongPollTimeoutError(DexServiceError):
    exit_code = 1
    sub_status = ErrorSubStatus.LONG_POLL_TIMEOUT
    grpc_code = StatusCode.DEADLINE_EXCEEDED


class WorkerInvocationError(DexServiceError):
    """An RPC handler failed (raised, timed out, returned what the SDK refuses). Beside the
    service's fields: `worker_code` the Worker's status (UNKNOWN, as the official Worker reports
    a handler's exception), `worker_error_type` and `worker_error_detail` what it raised.
    Made as dex makes it, `WorkerInvocationError(error_type, error_detail)`, or in the official
    SDK's eight-argument form."""

    sub_status = ErrorSubStatus.WORKER_API_ERROR

    def __init__(self, *args: Any, worker_code: Any = StatusCode.UNKNOWN, **fields: Any) -> None:
        if len(args) == 8:  # the official SDK's form
            service, (worker_code, worker_error_type, worker_error_detail) = args[:5], args[5:]
            super().__init__(*service, **fields)
        elif len(args) == 1:  # its message alone (as pickle and copy remake it; they restore the rest)
            worker_error_type, worker_error_detail = "", args[0]
            super().__init__(args[0], **fields)
        else:
            worker_error_type, worker_error_detail = args
            super().__init__(f"{worker_error_type}: {worker_error_detail}", **fields)
        self.worker_code: StatusCode | None = None if worker_code is None else StatusCode.of(worker_code)
        self.worker_error_type: str = worker_error_type
        self.worker_error_detail: str = worker_error_detail


class NotSupportedYetError(DexError):
    """A Dex feature that dex defines (so flows import and graph) but cannot run yet."""

    exit_code = 2


class FlowCodeError(DexError):
    """The flow's code uses the SDK in a way that can never work (retrying will not help):
    the engine fails the flow with INVALID_USER_FLOW_CODE instead of retrying."""

    exit_code = 1


class AttemptFencedError(BaseException):
    """Raised inside a handler whose attempt was timed out, cancelled or taken over.

    Not a DexError on purpose: it is a control signal, not a failure of the flow. Its late
    heartbeats, Stream writes and decision are refused. A BaseException (like
    asyncio.CancelledError) so that the handler's own `except Exception:` does not swallow it.
    """


class FlowClosingError(DexServiceError):
    """The flow is closing: it accepts no new work."""

    exit_code = 4
    sub_status = ErrorSubStatus.FLOW_CLOSING
    grpc_code = StatusCode.FAILED_PRECONDITION


class RpcLockConflictError(DexServiceError):
    """An RPC could not take the Attribute locks it needs (another holder)."""

    exit_code = 4
    sub_status = ErrorSubStatus.WORKER_API_ERROR
    grpc_code = StatusCode.ABORTED


class RequestTimeoutError(DexServiceError):
    exit_code = 1
    sub_status = ErrorSubStatus.REQUEST_TIMEOUT
    grpc_code = StatusCode.DEADLINE_EXCEEDED


class ChannelMessageNotFoundError(DexServiceError):
    """A pending channel message id no longer exists."""

    exit_code = 3
    sub_status = ErrorSubStatus.CHANNEL_MESSAGE_NOT_FOUND
    grpc_code = StatusCode.NOT_FOUND


class ChannelMessagesNotLoadedError(DexError):
    """An RPC read pending messages of a channel it did not load (`@rpc(load_channels=...)`)."""

    exit_code = 1


class AttributeMapNotLoadedError(DexError):
    """A handler read an AttributeMap instance it did not load (`load_attribute_maps`, ...)."""

    exit_code = 1
