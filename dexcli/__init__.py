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
    from dexcli.client import AsyncClient as AsyncClient, Client as Client
    from dexcli.sdk.context import (
        AsyncContext as AsyncContext,
        Context as Context,
        RecoveryError as RecoveryError,
        RecoveryErrorInfo as RecoveryErrorInfo,
        StepOutput as StepOutput,
        heartbeat as heartbeat,
    )
    from dexcli.sdk.decisions import (
        StepDecision as StepDecision,
        StepMovement as StepMovement,
        dead_end as dead_end,
        force_complete as force_complete,
        force_complete_if_channels_empty as force_complete_if_channels_empty,
        force_fail as force_fail,
        go_to as go_to,
        go_to_many as go_to_many,
        go_to_multi as go_to_multi,
        graceful_complete as graceful_complete,
        retry_after as retry_after,
    )
    from dexcli.sdk.errors import (
        DexServiceError as DexServiceError,
        FlowAlreadyStartedError as FlowAlreadyStartedError,
        FlowCodeError as FlowCodeError,
        FlowDefinitionError as FlowDefinitionError,
        FlowNotActiveError as FlowNotActiveError,
        FlowNotActiveOrNotFoundError as FlowNotActiveOrNotFoundError,
        FlowNotFoundError as FlowNotFoundError,
        InvalidStepResultError as InvalidStepResultError,
        LongPollTimeoutError as LongPollTimeoutError,
        NotSupportedYetError as NotSupportedYetError,
        ValueMappingError as ValueMappingError,
        WorkerInvocationError as WorkerInvocationError,
    )
    from dexcli.sdk.flow import (
        Flow as Flow,
        PersistenceSchema as PersistenceSchema,
        Step as Step,
        StepList as StepList,
    )
    from dexcli.sdk.options import (
        RetryPolicy as RetryPolicy,
        StepDurability as StepDurability,
        StepOptions as StepOptions,
        WaitForFailurePolicy as WaitForFailurePolicy,
    )
    from dexcli.sdk.registry import Registry as Registry
    from dexcli.sdk.results import (
        FlowErrorType as FlowErrorType,
        FlowInfo as FlowInfo,
        FlowResult as FlowResult,
        FlowStatus as FlowStatus,
        IdReusePolicy as IdReusePolicy,
        StartFlowOptions as StartFlowOptions,
        StepCompletion as StepCompletion,
        StopFlowOptions as StopFlowOptions,
        StopType as StopType,
    )
    from dexcli.sdk.stream import (
        Stream as Stream,
        StreamMessage as StreamMessage,
        StreamMessagesPage as StreamMessagesPage,
    )
    from dexcli.sdk.waiting import (
        Attribute as Attribute,
        AttributeIndex as AttributeIndex,
        AttributeLock as AttributeLock,
        AttributeMap as AttributeMap,
        Channel as Channel,
        ChannelMap as ChannelMap,
        ConditionCombination as ConditionCombination,
        IndexType as IndexType,
        RPCResult as RPCResult,
        SubFlow as SubFlow,
        Timer as Timer,
        Wait as Wait,
        rpc as rpc,
    )

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
