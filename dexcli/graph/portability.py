"""`dex lint --portable`: what in a flow's source would not carry over to a Dex server.

The README's promise is that a flow moves to Dex by changing `from dexcli import ...` to
`from dex import ...`. These rules read the source files of the flow's class and its steps'
classes and report, each with file:line and the fix:

    portability/dex-only-module     an import of a dexcli submodule the official SDK has no
                                    counterpart of (`dexcli.wait` is `dex.wait`; `dexcli.testing` is dex's)
    portability/dex-only-name       a name of `dexcli` (or of `dexcli.<module>`) the official SDK's
                                    does not export, or a member only dex's objects have
                                    (StepList.all_steps, ...)
    portability/dex-only-parameter  a keyword only dex takes (Worker(db=...), start_flow(flow_ref=...),
                                    ...) or start_flow with a None flow id (dex generates one)
    portability/async-handler       an `async def` handler: dex runs it under any registry, the
                                    official Registry refuses it unless allow_async_handlers=True,
                                    and only an AsyncWorker runs it

The official SDK is not imported: its public names are written down below (dex-python-sdk
1.23.0's `dex.__all__`); tests/parity checks the lists against the installed SDK.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from typing import Any

# dex-python-sdk 1.23.0: `dex.__all__`.
OFFICIAL_NAMES = frozenset({
    "BOOL", "BYTES", "DOUBLE", "INT64", "STRING", "ActiveStepSearchMode", "ApiKeyCredential", "ApiKeyExchangeError",
    "AsyncBufferedTextStream", "AsyncClient", "AsyncContext", "AsyncWorker", "Attribute", "AttributeIndex",
    "AttributeLock", "AttributeMap", "AttributeMapLoad", "AttributeMapNotLoadedError", "AttributeMatch", "BlobCache",
    "BlobCacheConfig", "BufferedTextStream", "Channel", "ChannelMap", "ChannelMapLoad", "ChannelMessage",
    "ChannelMessageNotFoundError", "ChannelMessagesNotLoadedError", "Client", "ClientOptions", "Codec",
    "CodecRegistry", "ConditionCombination", "Context", "Credential", "DexServiceError", "ErrorSubStatus",
    "FileCredential", "Flow", "FlowAlreadyStartedError", "FlowClosingError", "FlowConfig", "FlowDefinitionError",
    "FlowErrorType", "FlowInfo", "FlowNotActiveOrNotFoundError", "FlowNotFoundError", "FlowResult", "FlowStatus",
    "FlowTimeoutHandlerOptions", "FlowTimeoutPolicy", "HealthInfo", "IdReusePolicy", "IndexType",
    "InvalidStepResultError", "JsonCodec", "LongPollTimeoutError", "PersistenceSchema", "PullQueueRegistrationState",
    "PullRegistrationError", "PullRegistrationState", "PullWorkerOptions", "RPCInvokeOptions", "RPCResult",
    "RecoveryErrorInfo", "Registry", "RequestTimeoutError", "RetryAfterError", "RetryPolicy", "RpcLockConflictError",
    "SearchFlowEntry", "SearchFlowsPage", "StartFlowOptions", "Step", "StepCompletion", "StepDecision",
    "StepDurability", "StepExecutionId", "StepList", "StepMovement", "StepOptions", "StepOutput", "StopFlowOptions",
    "StopType", "Stream", "StreamMessage", "StreamMessagesPage", "SubFlow", "SubFlowOptions", "SubFlowReusePolicy",
    "TimeTravelOptions", "TimeTravelStepMethod", "TimeTravelType", "Timer", "TimerId", "Value", "ValueMappingError",
    "Wait", "WaitForAttributeOptions", "WaitForFailurePolicy", "WaitForStepCompletionOptions", "WireKind", "Worker",
    "WorkerInvocationError", "WorkerOptions", "WorkerTarget", "dead_end", "force_complete",
    "force_complete_if_channels_empty", "force_fail", "go_to", "go_to_many", "graceful_complete", "heartbeat",
    "open_blob_cache", "retry_after", "rpc",
})

# dex-python-sdk 1.23.0: each public module of the `dex` package with the names of `dex.__all__` it
# defines, which `from dex.<module> import ...` gives and `from dexcli.<module> import ...` mirrors.
# `_grpc_errors` is private, but Dex's own docs and examples import retry_after from it.
OFFICIAL_MODULES: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "_grpc_errors": {"RetryAfterError", "retry_after"},
    "async_client": {"AsyncClient"},
    "async_worker": {"AsyncWorker"},
    "attribute": {"Attribute", "AttributeIndex", "AttributeLock", "AttributeMap", "AttributeMapLoad", "IndexType"},
    "attribute_match": {"AttributeMatch"},
    "blob_cache": {"BlobCache", "BlobCacheConfig", "open_blob_cache"},
    "channel": {"Channel", "ChannelMap", "ChannelMapLoad", "ChannelMessage"},
    "client": {"Client"},
    "client_options": {"ClientOptions"},
    "codec": {"BOOL", "BYTES", "Codec", "CodecRegistry", "DOUBLE", "INT64", "JsonCodec", "STRING", "Value",
              "WireKind"},
    "condition": {"ConditionCombination"},
    "context": {"AsyncContext", "Context", "RecoveryErrorInfo"},
    "credential": {"ApiKeyCredential", "ApiKeyExchangeError", "Credential", "FileCredential"},
    "flow": {"Flow", "PersistenceSchema", "Registry", "rpc", "RPCResult"},
    "flow_config": {"ActiveStepSearchMode", "FlowConfig"},
    "flow_info": {"FlowInfo", "FlowStatus", "HealthInfo", "SearchFlowEntry", "SearchFlowsPage"},
    "flow_options": {"FlowTimeoutHandlerOptions", "FlowTimeoutPolicy", "IdReusePolicy", "StartFlowOptions",
                     "StopFlowOptions", "StopType", "SubFlowOptions", "SubFlowReusePolicy", "TimeTravelOptions",
                     "TimeTravelStepMethod", "TimeTravelType"},
    "flow_result": {"FlowResult", "StepCompletion"},
    "pull_registration": {"PullQueueRegistrationState", "PullRegistrationError", "PullRegistrationState"},
    "rpc_invoke_options": {"RPCInvokeOptions"},
    "runtime_errors": {"AttributeMapNotLoadedError", "ChannelMessageNotFoundError", "ChannelMessagesNotLoadedError",
                       "DexServiceError", "ErrorSubStatus", "FlowAlreadyStartedError", "FlowClosingError",
                       "FlowDefinitionError", "FlowErrorType", "FlowNotActiveOrNotFoundError", "FlowNotFoundError",
                       "InvalidStepResultError", "LongPollTimeoutError", "RequestTimeoutError",
                       "RpcLockConflictError", "ValueMappingError", "WorkerInvocationError"},
    "step": {"dead_end", "force_complete", "force_complete_if_channels_empty", "force_fail", "go_to", "go_to_many",
             "graceful_complete", "heartbeat", "RetryPolicy", "Step", "StepDecision", "StepDurability", "StepList",
             "StepMovement", "StepOptions", "StepOutput", "WaitForFailurePolicy"},
    "step_execution": {"StepExecutionId", "TimerId"},
    "stream": {"AsyncBufferedTextStream", "BufferedTextStream", "Stream", "StreamMessage", "StreamMessagesPage"},
    "subflow": {"SubFlow"},
    "timer": {"Timer"},
    "wait": {"Wait"},
    "wait_options": {"WaitForAttributeOptions", "WaitForStepCompletionOptions"},
    "worker": {"Worker"},
    "worker_options": {"PullWorkerOptions", "WorkerOptions", "WorkerTarget"},
}.items()}

# Names dexcli once exported (or keeps in a submodule) that the official SDK lacks: the fix for each.
FORMER_NAMES = {
    "go_to_multi": "go_to_many(StepMovement.of(A, x), StepMovement.of(B, y))",
    "RecoveryError": "RecoveryErrorInfo (context.recovery_error in the recovery step)",
    "FlowCodeError": "let the step raise; Dex fails the flow with INVALID_USER_FLOW_CODE",
    "FlowNotActiveError": "FlowNotActiveOrNotFoundError",
    "NotSupportedYetError": "nothing to catch on Dex: the feature exists there",
}

# Members only dex's SDK objects have (by class), with distinctive names: a use of one breaks on Dex.
DEX_ONLY_MEMBERS = {
    "all_steps": ("StepList", "keep your own list of the steps you pass to StepList"),
    "definition_of": ("Registry", "keep the Flow instance you registered"),
    "has_output": ("StepDecision", "keep the output you passed to the decision"),
    "execute_failure_step": ("StepOptions", "keep the step class you passed to on_execute_failure_proceed_to"),
    "execute_failure_step_options": ("StepOptions", "keep the options you passed to on_execute_failure_proceed_to"),
    "heartbeat_timeout_seconds": ("StepOptions", "heartbeat_timeout.total_seconds()"),
    "method_timeout_seconds": ("StepOptions", "execute_method_timeout.total_seconds()"),
    "delay_after": ("RetryPolicy", "compute the backoff yourself; Dex applies the policy"),
}

# Keywords only dex's callables take, by callable name: the fix for each.
DEX_ONLY_KEYWORDS = {
    "Registry": {"checks": "drop it: Dex runs no static checks (run `dex lint` in CI instead)"},
    "Client": {"db": "Client(registry, ClientOptions(server_address=...)) on Dex", "clock": "drop it",
               "engine": "drop it"},
    "AsyncClient": {"db": "AsyncClient(registry, ClientOptions(server_address=...)) on Dex", "clock": "drop it",
                    "engine": "drop it"},
    "Worker": {"db": "Worker(registry, blob_cache, WorkerOptions(...)) on Dex", "clock": "drop it"},
    "AsyncWorker": {"db": "AsyncWorker(registry, blob_cache, WorkerOptions(...)) on Dex", "clock": "drop it"},
    "start_flow": {"flow_ref": "drop it: a Dex worker hosts the flow by its type"},
    "run": {"until_idle": "Worker.run is dex's: call worker.start() and stop() on Dex"},
}

Hit = tuple[str, str, int, str, "str | None"]  # (rule id, file, line, message with the fix, step type)


def _source_files(flow: Any, steps: list[tuple[str, Any]]) -> list[str]:
    files: list[str] = []
    for obj in [flow, *(inst for _, inst in steps)]:
        try:
            path = inspect.getsourcefile(type(obj))
        except (TypeError, OSError):
            path = None
        if path and path not in files:
            files.append(path)
    return files


def _parse(path: str) -> ast.Module | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


def _name_fix(name: str) -> str:
    return FORMER_NAMES.get(name, "use only names `dex` exports (see `dex lint --portable` in the README)")


def _import_hits(path: str, node: ast.Import | ast.ImportFrom) -> Iterator[Hit]:
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "dexcli":
        for alias in node.names:
            if alias.name not in OFFICIAL_NAMES:
                yield ("portability/dex-only-name", path, node.lineno, f"`{alias.name}` is dexcli's only; the "
                       f"official SDK has no such name. Fix: {_name_fix(alias.name)}", None)
        return
    official = _official_module(node.module or "") if isinstance(node, ast.ImportFrom) and not node.level else None
    if isinstance(node, ast.ImportFrom) and official is not None:
        for alias in node.names:
            if alias.name not in OFFICIAL_MODULES[official]:
                yield ("portability/dex-only-name", path, node.lineno, f"`{alias.name}` is not in the official "
                       f"`dex.{official}`; that import breaks on the swap. Fix: import it from the module the "
                       "official SDK defines it in (or from `dexcli`)", None)
        return
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    for module in modules:
        if module.startswith("dexcli.") and _official_module(module) is None:
            names = ", ".join(a.name for a in node.names) if isinstance(node, ast.ImportFrom) else module
            yield ("portability/dex-only-module", path, node.lineno,
                   f"`{module}` is a dexcli module; swapping `dexcli` for `dex` in the import does not "
                   f"move this import ({names}). Fix: import from `dexcli` (or the official SDK's module "
                   f"paths, `dexcli.wait`...) only names the official SDK has, or keep this code out of the "
                   f"flow's modules", None)


def _official_module(module: str) -> str | None:
    """`dexcli.<name>` when the official SDK has `dex.<name>`: the name, else None."""
    top, _, name = module.partition(".")
    return name if top == "dexcli" and name in OFFICIAL_MODULES else None


def _callee(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _call_hits(path: str, node: ast.Call) -> Iterator[Hit]:
    callee = _callee(node)
    for kw in node.keywords:
        fix = DEX_ONLY_KEYWORDS.get(callee or "", {}).get(kw.arg or "")
        if fix is not None:
            yield ("portability/dex-only-parameter", path, node.lineno,
                   f"{callee}({kw.arg}=...) is dexcli's only; the official {callee} has no {kw.arg} parameter. "
                   f"Fix: {fix}", None)
    flow_id = node.args[1] if callee == "start_flow" and len(node.args) > 1 else None
    if isinstance(flow_id, ast.Constant) and flow_id.value is None:
        yield ("portability/dex-only-parameter", path, node.lineno,
               "start_flow(flow, None, ...): only dexcli generates a flow id; the official SDK requires one. "
               "Fix: pass a flow id (e.g. str(uuid.uuid4()))", None)


def _member_hits(path: str, node: ast.Attribute) -> Iterator[Hit]:
    if isinstance(node.value, ast.Name) and node.value.id == "dexcli" and node.attr not in OFFICIAL_NAMES \
            and node.attr not in OFFICIAL_MODULES:
        yield ("portability/dex-only-name", path, node.lineno,
               f"`dexcli.{node.attr}` is dexcli's only. Fix: {_name_fix(node.attr)}", None)
        return
    member = DEX_ONLY_MEMBERS.get(node.attr)
    if member is not None:
        yield ("portability/dex-only-name", path, node.lineno,
               f"`.{node.attr}` is a member of dexcli's {member[0]} only; the official {member[0]} has none. "
               f"Fix: {member[1]}", None)


def _allows_async(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.keyword) and n.arg == "allow_async_handlers"
               and isinstance(n.value, ast.Constant) and n.value.value is True for n in ast.walk(tree))


def _async_hits(steps: list[tuple[str, Any]], flow: Any) -> Iterator[Hit]:
    handlers: list[tuple[str | None, type, str]] = [
        (st, type(inst), name) for st, inst in steps for name in ("execute", "wait_for")]
    handlers.append((None, type(flow), "handle_timeout"))
    for step_type, cls, name in handlers:
        fn = cls.__dict__.get(name)
        if fn is None or not inspect.iscoroutinefunction(fn):
            continue
        try:
            path, line = inspect.getsourcefile(fn) or "", inspect.getsourcelines(fn)[1]
        except (TypeError, OSError):
            continue
        yield ("portability/async-handler", path, line,
               f"{cls.__name__}.{name} is async: dex runs it, but the official Registry refuses it unless "
               "Registry(..., allow_async_handlers=True), and only an AsyncWorker runs it. Fix: register with "
               "allow_async_handlers=True and serve with AsyncWorker (or make it synchronous)", step_type)


def portability_hits(flow: Any, steps: list[tuple[str, Any]]) -> list[Hit]:
    """Every portability finding in the source files of `flow` and its `steps` ((type, instance))."""
    hits: list[Hit] = []
    allows_async = False
    for path in _source_files(flow, steps):
        tree = _parse(path)
        if tree is None:
            continue
        allows_async = allows_async or _allows_async(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                hits.extend(_import_hits(path, node))
            elif isinstance(node, ast.Call):
                hits.extend(_call_hits(path, node))
            elif isinstance(node, ast.Attribute):
                hits.extend(_member_hits(path, node))
    if not allows_async:
        hits.extend(_async_hits(steps, flow))
    return hits
