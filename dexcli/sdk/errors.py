"""Errors a flow author or a client can see. One base class; the CLI exits with each one's
`exit_code`, in the scheme `dex --help` documents: 1 the flow's own failure (a handler raised,
a wait timed out), 2 usage or bad input, 3 not found, 4 exists but closed or not in a state for
that (a conflict)."""

from __future__ import annotations

import enum


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
    """Base for errors the (local) Dex service reports to a client. `sub_status` classifies it
    as the server would (each subclass has its own); `detail` is its message."""

    sub_status = ErrorSubStatus.UNCATEGORIZED

    @property
    def detail(self) -> str:
        return str(self)


class FlowAlreadyStartedError(DexServiceError):
    exit_code = 4
    sub_status = ErrorSubStatus.FLOW_ALREADY_STARTED


class FlowNotFoundError(DexServiceError):
    exit_code = 3
    sub_status = ErrorSubStatus.FLOW_NOT_EXISTS


class FlowNotActiveOrNotFoundError(DexServiceError):
    exit_code = 3
    sub_status = ErrorSubStatus.FLOW_NOT_EXISTS


class FlowEndedError(FlowNotActiveOrNotFoundError):
    """The flow exists but has closed (COMPLETED, FAILED, ...): it takes no stop, timer skip or
    RPC effects. What every command exits with for a closed flow: 4, as for a conflict."""

    exit_code = 4


class TimeTravelPointError(DexServiceError):
    """Client.time_travel named a point its run's history does not have (no such step
    execution or step type, no event at or after that time), or one the flow's code can no
    longer run from: the server's INVALID_ARGUMENT, a DexServiceError. Bad input: exit 2."""

    exit_code = 2


class LongPollTimeoutError(DexServiceError):
    exit_code = 1
    sub_status = ErrorSubStatus.LONG_POLL_TIMEOUT


class WorkerInvocationError(DexServiceError):
    sub_status = ErrorSubStatus.WORKER_API_ERROR

    def __init__(self, worker_error_type: str, worker_error_detail: str) -> None:
        self.worker_error_type = worker_error_type
        self.worker_error_detail = worker_error_detail
        super().__init__(f"{worker_error_type}: {worker_error_detail}")


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


class RpcLockConflictError(DexServiceError):
    """An RPC could not take the Attribute locks it needs (another holder)."""

    exit_code = 4
    sub_status = ErrorSubStatus.WORKER_API_ERROR


class RequestTimeoutError(DexServiceError):
    exit_code = 1
    sub_status = ErrorSubStatus.REQUEST_TIMEOUT


class ChannelMessageNotFoundError(DexServiceError):
    """A pending channel message id no longer exists."""

    exit_code = 3
    sub_status = ErrorSubStatus.CHANNEL_MESSAGE_NOT_FOUND


class ChannelMessagesNotLoadedError(DexError):
    """An RPC read pending messages of a channel it did not load (`@rpc(load_channels=...)`)."""

    exit_code = 1


class AttributeMapNotLoadedError(DexError):
    """A handler read an AttributeMap instance it did not load (`load_attribute_maps`, ...)."""

    exit_code = 1
