"""dex: run Dex flows on one machine, durably, with a live terminal view.

Flows written against this module move to a Dex server by changing the import line
(`from dexcli import ...` -> `from dex import ...`). Only the SDK lives here; the engine, the
store and the CLI load when they are used.

Each public name is written once, in the `if TYPE_CHECKING:` block below (`X as X` marks it
re-exported): type checkers read it there, and `__getattr__` reads that same block from this
file's source on first use, to import names lazily and build `__all__`, so `import dexcli`
loads no SDK module (`dex --help` does not pay for the whole SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the public API; at run time each name loads on first use
    from dexcli.client import AsyncClient as AsyncClient
    from dexcli.client import Client as Client
    from dexcli.sdk.attribute_match import (
        AttributeMatch as AttributeMatch,
    )
    from dexcli.sdk.attributes import (
        Attribute as Attribute,
    )
    from dexcli.sdk.attributes import (
        AttributeIndex as AttributeIndex,
    )
    from dexcli.sdk.attributes import (
        AttributeLock as AttributeLock,
    )
    from dexcli.sdk.attributes import (
        AttributeMap as AttributeMap,
    )
    from dexcli.sdk.attributes import (
        IndexType as IndexType,
    )
    from dexcli.sdk.channels import (
        Channel as Channel,
    )
    from dexcli.sdk.channels import (
        ChannelMap as ChannelMap,
    )
    from dexcli.sdk.channels import (
        ChannelMapLoad as ChannelMapLoad,
    )
    from dexcli.sdk.channels import (
        ChannelMessage as ChannelMessage,
    )
    from dexcli.sdk.codec import (
        BOOL as BOOL,
    )
    from dexcli.sdk.codec import (
        BYTES as BYTES,
    )
    from dexcli.sdk.codec import (
        DOUBLE as DOUBLE,
    )
    from dexcli.sdk.codec import (
        INT64 as INT64,
    )
    from dexcli.sdk.codec import (
        STRING as STRING,
    )
    from dexcli.sdk.codec import (
        Codec as Codec,
    )
    from dexcli.sdk.codec import (
        CodecRegistry as CodecRegistry,
    )
    from dexcli.sdk.codec import (
        JsonCodec as JsonCodec,
    )
    from dexcli.sdk.codec import (
        Value as Value,
    )
    from dexcli.sdk.codec import (
        WireKind as WireKind,
    )
    from dexcli.sdk.conditions import (
        ConditionCombination as ConditionCombination,
    )
    from dexcli.sdk.conditions import (
        StepExecutionId as StepExecutionId,
    )
    from dexcli.sdk.conditions import (
        SubFlow as SubFlow,
    )
    from dexcli.sdk.conditions import (
        Timer as Timer,
    )
    from dexcli.sdk.conditions import (
        TimerId as TimerId,
    )
    from dexcli.sdk.conditions import (
        Wait as Wait,
    )
    from dexcli.sdk.context import (
        AsyncContext as AsyncContext,
    )
    from dexcli.sdk.context import (
        Context as Context,
    )
    from dexcli.sdk.context import (
        RecoveryErrorInfo as RecoveryErrorInfo,
    )
    from dexcli.sdk.context import (
        StepOutput as StepOutput,
    )
    from dexcli.sdk.context import (
        heartbeat as heartbeat,
    )
    from dexcli.sdk.decisions import (
        RetryAfterError as RetryAfterError,
    )
    from dexcli.sdk.decisions import (
        StepDecision as StepDecision,
    )
    from dexcli.sdk.decisions import (
        StepMovement as StepMovement,
    )
    from dexcli.sdk.decisions import (
        dead_end as dead_end,
    )
    from dexcli.sdk.decisions import (
        force_complete as force_complete,
    )
    from dexcli.sdk.decisions import (
        force_complete_if_channels_empty as force_complete_if_channels_empty,
    )
    from dexcli.sdk.decisions import (
        force_fail as force_fail,
    )
    from dexcli.sdk.decisions import (
        go_to as go_to,
    )
    from dexcli.sdk.decisions import (
        go_to_many as go_to_many,
    )
    from dexcli.sdk.decisions import (
        graceful_complete as graceful_complete,
    )
    from dexcli.sdk.decisions import (
        retry_after as retry_after,
    )
    from dexcli.sdk.errors import (
        ChannelMessageNotFoundError as ChannelMessageNotFoundError,
    )
    from dexcli.sdk.errors import (
        ChannelMessagesNotLoadedError as ChannelMessagesNotLoadedError,
    )
    from dexcli.sdk.errors import (
        DexServiceError as DexServiceError,
    )
    from dexcli.sdk.errors import (
        ErrorSubStatus as ErrorSubStatus,
    )
    from dexcli.sdk.errors import (
        FlowAlreadyStartedError as FlowAlreadyStartedError,
    )
    from dexcli.sdk.errors import (
        FlowClosingError as FlowClosingError,
    )
    from dexcli.sdk.errors import (
        FlowDefinitionError as FlowDefinitionError,
    )
    from dexcli.sdk.errors import (
        FlowNotActiveOrNotFoundError as FlowNotActiveOrNotFoundError,
    )
    from dexcli.sdk.errors import (
        FlowNotFoundError as FlowNotFoundError,
    )
    from dexcli.sdk.errors import (
        InvalidStepResultError as InvalidStepResultError,
    )
    from dexcli.sdk.errors import (
        LongPollTimeoutError as LongPollTimeoutError,
    )
    from dexcli.sdk.errors import (
        RequestTimeoutError as RequestTimeoutError,
    )
    from dexcli.sdk.errors import (
        RpcLockConflictError as RpcLockConflictError,
    )
    from dexcli.sdk.errors import (
        ValueMappingError as ValueMappingError,
    )
    from dexcli.sdk.errors import (
        WorkerInvocationError as WorkerInvocationError,
    )
    from dexcli.sdk.flow import (
        Flow as Flow,
    )
    from dexcli.sdk.flow import (
        PersistenceSchema as PersistenceSchema,
    )
    from dexcli.sdk.flow import (
        Step as Step,
    )
    from dexcli.sdk.flow import (
        StepList as StepList,
    )
    from dexcli.sdk.flow_config import (
        ActiveStepSearchMode as ActiveStepSearchMode,
    )
    from dexcli.sdk.flow_config import (
        FlowConfig as FlowConfig,
    )
    from dexcli.sdk.options import (
        RetryPolicy as RetryPolicy,
    )
    from dexcli.sdk.options import (
        StepDurability as StepDurability,
    )
    from dexcli.sdk.options import (
        StepOptions as StepOptions,
    )
    from dexcli.sdk.options import (
        WaitForFailurePolicy as WaitForFailurePolicy,
    )
    from dexcli.sdk.registry import Registry as Registry
    from dexcli.sdk.results import (
        FlowErrorType as FlowErrorType,
    )
    from dexcli.sdk.results import (
        FlowInfo as FlowInfo,
    )
    from dexcli.sdk.results import (
        FlowResult as FlowResult,
    )
    from dexcli.sdk.results import (
        FlowStatus as FlowStatus,
    )
    from dexcli.sdk.results import (
        FlowTimeoutHandlerOptions as FlowTimeoutHandlerOptions,
    )
    from dexcli.sdk.results import (
        FlowTimeoutPolicy as FlowTimeoutPolicy,
    )
    from dexcli.sdk.results import (
        HealthInfo as HealthInfo,
    )
    from dexcli.sdk.results import (
        IdReusePolicy as IdReusePolicy,
    )
    from dexcli.sdk.results import (
        StartFlowOptions as StartFlowOptions,
    )
    from dexcli.sdk.results import (
        StepCompletion as StepCompletion,
    )
    from dexcli.sdk.results import (
        StopFlowOptions as StopFlowOptions,
    )
    from dexcli.sdk.results import (
        StopType as StopType,
    )
    from dexcli.sdk.results import (
        TimeTravelOptions as TimeTravelOptions,
    )
    from dexcli.sdk.results import (
        TimeTravelStepMethod as TimeTravelStepMethod,
    )
    from dexcli.sdk.results import (
        TimeTravelType as TimeTravelType,
    )
    from dexcli.sdk.rpc import (
        RPCInvokeOptions as RPCInvokeOptions,
    )
    from dexcli.sdk.rpc import (
        RPCResult as RPCResult,
    )
    from dexcli.sdk.rpc import (
        rpc as rpc,
    )
    from dexcli.sdk.search import (
        SearchFlowEntry as SearchFlowEntry,
    )
    from dexcli.sdk.search import (
        SearchFlowsPage as SearchFlowsPage,
    )
    from dexcli.sdk.stream import (
        AsyncBufferedTextStream as AsyncBufferedTextStream,
    )
    from dexcli.sdk.stream import (
        BufferedTextStream as BufferedTextStream,
    )
    from dexcli.sdk.stream import (
        Stream as Stream,
    )
    from dexcli.sdk.stream import (
        StreamMessage as StreamMessage,
    )
    from dexcli.sdk.stream import (
        StreamMessagesPage as StreamMessagesPage,
    )
    from dexcli.sdk.subflow_options import (
        SubFlowOptions as SubFlowOptions,
    )
    from dexcli.sdk.subflow_options import (
        SubFlowReusePolicy as SubFlowReusePolicy,
    )
    from dexcli.sdk.wait_options import (
        WaitForAttributeOptions as WaitForAttributeOptions,
    )
    from dexcli.sdk.wait_options import (
        WaitForStepCompletionOptions as WaitForStepCompletionOptions,
    )
    from dexcli.worker import AsyncWorker as AsyncWorker
    from dexcli.worker import Worker as Worker

__version__ = "0.1.0"

_exports: dict[str, tuple[str, str]] | None = None  # public name -> (module, name there)


def _public() -> dict[str, tuple[str, str]]:
    """The imports of the `if TYPE_CHECKING:` block above, read once from this file's source."""
    global _exports
    if _exports is None:
        import ast

        get_source = getattr(__spec__.loader, "get_source", None)
        source = get_source(__name__) if get_source is not None else None
        if source is None:
            raise ImportError("dexcli: cannot read the source of dexcli/__init__.py, which lists the public API")
        found: dict[str, tuple[str, str]] = {}
        for node in ast.parse(source).body:
            if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for stmt in node.body:
                    if isinstance(stmt, ast.ImportFrom) and stmt.module:
                        found.update({a.asname or a.name: (stmt.module, a.name) for a in stmt.names})
        _exports = found
    return _exports


def __getattr__(name: str) -> Any:
    if name == "__all__":
        value: Any = sorted(_public())
    else:
        where = None if name.startswith("_") else _public().get(name)
        if where is None:
            raise AttributeError(f"module 'dexcli' has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_public()) | {"__all__"})
