"""dex: run Dex flows on one machine, durably, with a live terminal view.

Flows written against this module move to a Dex server by changing the import line
(`from dexcli import ...` -> `from dex import ...`). Only the SDK lives here; the engine, the
store and the CLI load when they are used.
"""

from __future__ import annotations

from typing import Any

from dexcli.sdk.context import AsyncContext, Context, RecoveryError, RecoveryErrorInfo, StepOutput, heartbeat
from dexcli.sdk.decisions import (
    StepDecision,
    StepMovement,
    dead_end,
    force_complete,
    force_complete_if_channels_empty,
    force_fail,
    go_to,
    go_to_many,
    go_to_multi,
    graceful_complete,
    retry_after,
)
from dexcli.sdk.errors import (
    DexServiceError,
    FlowAlreadyStartedError,
    FlowDefinitionError,
    FlowNotActiveError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    InvalidStepResultError,
    LongPollTimeoutError,
    NotSupportedYetError,
    ValueMappingError,
    WorkerInvocationError,
)
from dexcli.sdk.flow import Flow, PersistenceSchema, Step, StepList
from dexcli.sdk.options import RetryPolicy, StepDurability, StepOptions, WaitForFailurePolicy
from dexcli.sdk.registry import Registry
from dexcli.sdk.results import (
    FlowErrorType,
    FlowInfo,
    FlowResult,
    FlowStatus,
    IdReusePolicy,
    StartFlowOptions,
    StepCompletion,
    StopFlowOptions,
    StopType,
)
from dexcli.sdk.stream import Stream, StreamMessage, StreamMessagesPage
from dexcli.sdk.waiting import (
    Attribute,
    AttributeIndex,
    AttributeLock,
    AttributeMap,
    Channel,
    ChannelMap,
    ConditionCombination,
    IndexType,
    RPCResult,
    SubFlow,
    Timer,
    Wait,
    rpc,
)

__version__ = "0.1.0"

_LAZY = {"Client": "dexcli.client", "AsyncClient": "dexcli.client"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dexcli' has no attribute {name!r}")


__all__ = [
    "AsyncClient",
    "AsyncContext",
    "Attribute",
    "AttributeIndex",
    "AttributeLock",
    "AttributeMap",
    "Channel",
    "ChannelMap",
    "Client",
    "ConditionCombination",
    "Context",
    "DexServiceError",
    "Flow",
    "FlowAlreadyStartedError",
    "FlowDefinitionError",
    "FlowErrorType",
    "FlowInfo",
    "FlowNotActiveError",
    "FlowNotActiveOrNotFoundError",
    "FlowNotFoundError",
    "FlowResult",
    "FlowStatus",
    "IdReusePolicy",
    "IndexType",
    "InvalidStepResultError",
    "LongPollTimeoutError",
    "NotSupportedYetError",
    "PersistenceSchema",
    "RPCResult",
    "RecoveryError",
    "RecoveryErrorInfo",
    "Registry",
    "RetryPolicy",
    "StartFlowOptions",
    "Step",
    "StepCompletion",
    "StepDecision",
    "StepDurability",
    "StepList",
    "StepMovement",
    "StepOptions",
    "StepOutput",
    "StopFlowOptions",
    "StopType",
    "Stream",
    "StreamMessage",
    "StreamMessagesPage",
    "SubFlow",
    "Timer",
    "ValueMappingError",
    "Wait",
    "WaitForFailurePolicy",
    "WorkerInvocationError",
    "dead_end",
    "force_complete",
    "force_complete_if_channels_empty",
    "force_fail",
    "go_to",
    "go_to_many",
    "go_to_multi",
    "graceful_complete",
    "heartbeat",
    "retry_after",
    "rpc",
]
