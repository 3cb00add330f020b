"""dex: run Dex flows on one machine, durably, with a live terminal view.

Flows written against this module move to a Dex server by changing the import line
(`from dexcli import ...` -> `from dex import ...`). Only the SDK lives here; the engine, the
store and the CLI load when they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names load on first use, so `dex --help` does not import the whole SDK
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
        FlowCodeError,
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
    from dexcli.client import AsyncClient, Client

__version__ = "0.1.0"

_LAZY = {
    "AsyncContext": "dexcli.sdk.context",
    "Attribute": "dexcli.sdk.waiting",
    "AttributeIndex": "dexcli.sdk.waiting",
    "AttributeLock": "dexcli.sdk.waiting",
    "AttributeMap": "dexcli.sdk.waiting",
    "Channel": "dexcli.sdk.waiting",
    "ChannelMap": "dexcli.sdk.waiting",
    "ConditionCombination": "dexcli.sdk.waiting",
    "Context": "dexcli.sdk.context",
    "DexServiceError": "dexcli.sdk.errors",
    "Flow": "dexcli.sdk.flow",
    "FlowAlreadyStartedError": "dexcli.sdk.errors",
    "FlowCodeError": "dexcli.sdk.errors",
    "FlowDefinitionError": "dexcli.sdk.errors",
    "FlowErrorType": "dexcli.sdk.results",
    "FlowInfo": "dexcli.sdk.results",
    "FlowNotActiveError": "dexcli.sdk.errors",
    "FlowNotActiveOrNotFoundError": "dexcli.sdk.errors",
    "FlowNotFoundError": "dexcli.sdk.errors",
    "FlowResult": "dexcli.sdk.results",
    "FlowStatus": "dexcli.sdk.results",
    "IdReusePolicy": "dexcli.sdk.results",
    "IndexType": "dexcli.sdk.waiting",
    "InvalidStepResultError": "dexcli.sdk.errors",
    "LongPollTimeoutError": "dexcli.sdk.errors",
    "NotSupportedYetError": "dexcli.sdk.errors",
    "PersistenceSchema": "dexcli.sdk.flow",
    "RPCResult": "dexcli.sdk.waiting",
    "RecoveryError": "dexcli.sdk.context",
    "RecoveryErrorInfo": "dexcli.sdk.context",
    "Registry": "dexcli.sdk.registry",
    "RetryPolicy": "dexcli.sdk.options",
    "StartFlowOptions": "dexcli.sdk.results",
    "Step": "dexcli.sdk.flow",
    "StepCompletion": "dexcli.sdk.results",
    "StepDecision": "dexcli.sdk.decisions",
    "StepDurability": "dexcli.sdk.options",
    "StepList": "dexcli.sdk.flow",
    "StepMovement": "dexcli.sdk.decisions",
    "StepOptions": "dexcli.sdk.options",
    "StepOutput": "dexcli.sdk.context",
    "StopFlowOptions": "dexcli.sdk.results",
    "StopType": "dexcli.sdk.results",
    "Stream": "dexcli.sdk.stream",
    "StreamMessage": "dexcli.sdk.stream",
    "StreamMessagesPage": "dexcli.sdk.stream",
    "SubFlow": "dexcli.sdk.waiting",
    "Timer": "dexcli.sdk.waiting",
    "ValueMappingError": "dexcli.sdk.errors",
    "Wait": "dexcli.sdk.waiting",
    "WaitForFailurePolicy": "dexcli.sdk.options",
    "WorkerInvocationError": "dexcli.sdk.errors",
    "dead_end": "dexcli.sdk.decisions",
    "force_complete": "dexcli.sdk.decisions",
    "force_complete_if_channels_empty": "dexcli.sdk.decisions",
    "force_fail": "dexcli.sdk.decisions",
    "go_to": "dexcli.sdk.decisions",
    "go_to_many": "dexcli.sdk.decisions",
    "go_to_multi": "dexcli.sdk.decisions",
    "graceful_complete": "dexcli.sdk.decisions",
    "heartbeat": "dexcli.sdk.context",
    "retry_after": "dexcli.sdk.decisions",
    "rpc": "dexcli.sdk.waiting",
    "Client": "dexcli.client",
    "AsyncClient": "dexcli.client",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dexcli' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "FlowCodeError",
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
