"""RPCs: flow methods a client invokes on a running flow (`@rpc`), and what they return.

An RPC handler `(self, context[, input]) -> RPCResult[T] | None` runs once (one that holds
locks: up to 3 times if it raises, as the server runs it); its channel publishes, next steps
and cancellations commit atomically with its output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from dexcli.sdk.conditions import require_name
from dexcli.sdk.options import whole_seconds_problem

OutputT = TypeVar("OutputT")
CallableT = TypeVar("CallableT", bound=Callable[..., Any])
DEFAULT_RPC_TIMEOUT = timedelta(seconds=60)
# the server's budget for one RPC call (its API wait cap, `maxWaitSeconds`): the default, and
# the most a longer `@rpc(timeout=...)` gets
MAX_RPC_TIMEOUT = DEFAULT_RPC_TIMEOUT


@dataclass(frozen=True)
class RPCOptions:
    """What `@rpc(...)` was given (kept on the handler as `__dex_rpc_options__`)."""

    name: str | None
    timeout: timedelta | None
    lock_attributes: tuple[Any, ...]
    is_transactional: bool
    load_attribute_maps: tuple[Any, ...]
    load_attribute_map_instances: tuple[Any, ...]
    load_channels: tuple[Any, ...]
    load_channel_maps: tuple[Any, ...]
    load_channel_map_instances: tuple[Any, ...]


@overload
def rpc(handler: CallableT) -> CallableT: ...


@overload
def rpc(*, name: str | None = None, timeout: timedelta | None = None, lock_attributes: Sequence[Any] = (),
        is_transactional: bool = False, load_attribute_maps: Sequence[Any] = (),
        load_attribute_map_instances: Sequence[Any] = (), load_channels: Sequence[Any] = (),
        load_channel_maps: Sequence[Any] = (), load_channel_map_instances: Sequence[Any] = (),
        ) -> Callable[[CallableT], CallableT]: ...


def rpc(handler: Any = None, *, name: str | None = None, timeout: timedelta | None = None,
        lock_attributes: Sequence[Any] = (), is_transactional: bool = False,
        load_attribute_maps: Sequence[Any] = (), load_attribute_map_instances: Sequence[Any] = (),
        load_channels: Sequence[Any] = (), load_channel_maps: Sequence[Any] = (),
        load_channel_map_instances: Sequence[Any] = ()) -> Any:
    """Mark a Flow method as an RPC: `@rpc` or `@rpc(name=..., timeout=..., ...)`."""
    if name is not None:
        require_name(name)
    if timeout is not None and timeout < timedelta(0):
        raise ValueError("RPC timeout must not be negative")
    options = RPCOptions(name, timeout, tuple(lock_attributes), is_transactional, tuple(load_attribute_maps),
                         tuple(load_attribute_map_instances), tuple(load_channels), tuple(load_channel_maps),
                         tuple(load_channel_map_instances))

    def decorate(fn: Any) -> Any:
        fn.__dex_rpc_options__ = options
        return fn

    return decorate(handler) if handler is not None else decorate


def rpc_options(fn: Any) -> RPCOptions | None:
    """The `@rpc` options of a function or bound method, or None when it is not an RPC."""
    found = getattr(fn, "__dex_rpc_options__", None)
    return found if isinstance(found, RPCOptions) else None


@dataclass(frozen=True)
class RPCResult(Generic[OutputT]):
    """An RPC's output, the steps it starts and the step types it cancels (all atomic)."""

    output: OutputT
    next_steps: tuple[Any, ...] = ()
    canceling_steps: tuple[type[Any], ...] = ()

    def with_canceling_steps(self, *steps: type[Any]) -> RPCResult[OutputT]:
        combined = list(self.canceling_steps)
        for step in steps:
            if all(step is not current for current in combined):
                combined.append(step)
        return replace(self, canceling_steps=tuple(combined))


@dataclass(frozen=True)
class RPCInvokeOptions:
    """Runtime-selected AttributeMap locks and map-instance loads for one invocation."""

    lock_attribute_map_instances: tuple[Any, ...] = ()
    load_attribute_map_instances: tuple[Any, ...] = ()
    load_channel_map_instances: tuple[Any, ...] = ()


@dataclass(frozen=True)
class RpcSpec:
    """A registered RPC: its name, the flow's bound method, its input and output types."""

    name: str
    method: Callable[..., Any]  # bound to the registered flow instance
    options: RPCOptions
    is_async: bool
    has_input: bool
    input_type: Any
    output_type: Any  # None: the RPC returns no output

    @property
    def timeout(self) -> float:
        """Seconds the call may take: `@rpc(timeout=...)` (0 or None: the default), capped as
        the server caps it."""
        return min((self.options.timeout or DEFAULT_RPC_TIMEOUT), MAX_RPC_TIMEOUT).total_seconds()


def _rpc_signature(name: str, method: Any, allow_async: bool) -> tuple[bool, Any, Any]:
    """(has input, input type, output type) by the official rules, or TypeError naming the rule."""
    import inspect
    import typing

    from dexcli.sdk.context import Context

    if inspect.iscoroutinefunction(method) and not allow_async:
        raise TypeError(f"RPC {name} must be synchronous (this Registry has allow_async_handlers=False)")
    params = tuple(inspect.signature(method).parameters.values())
    try:
        hints = typing.get_type_hints(method)
    except Exception as exc:
        raise TypeError(f"RPC {name}: annotations cannot be resolved ({exc})") from None
    if len(params) not in (1, 2) or "return" not in hints:
        raise TypeError(f"RPC {name} must annotate Context, optional input, and return")
    if hints.get(params[0].name) is not Context:
        raise TypeError(f"RPC {name} context must be Context")
    if len(params) == 2 and params[1].name not in hints:
        raise TypeError(f"RPC {name} input must be annotated")
    input_type = hints[params[1].name] if len(params) == 2 else None
    returns = hints["return"]
    if typing.get_origin(returns) is RPCResult:
        args = typing.get_args(returns)
        if len(args) != 1:
            raise TypeError(f"RPC {name}: RPCResult must declare one output type")
        return len(params) == 2, input_type, args[0]
    if returns not in (None, type(None)):
        raise TypeError(f"RPC {name} must return RPCResult[O] or None")
    return len(params) == 2, input_type, None


def collect_rpcs(flow: Any, problems: list[str], *, allow_async: bool) -> dict[str, RpcSpec]:
    """The flow's `@rpc` methods by RPC name; what is wrong with them goes to `problems`."""
    import inspect

    found: dict[str, RpcSpec] = {}
    for attr in dir(flow):
        method = getattr(flow, attr, None)
        options = rpc_options(getattr(method, "__func__", method))
        if options is None:
            continue
        name = options.name or attr
        if name in found:
            problems.append(f"duplicate RPC {name}")
            continue
        try:
            has_input, input_type, output_type = _rpc_signature(name, method, allow_async)
        except TypeError as exc:
            problems.append(str(exc))
            continue
        timeout_problem = whole_seconds_problem(options.timeout, "timeout")
        if timeout_problem is not None:  # the SDK refuses it when the RPC is invoked; dex at registration
            problems.append(f"RPC {name}: {timeout_problem}")
            continue
        assert method is not None
        found[name] = RpcSpec(name, method, options, inspect.iscoroutinefunction(method), has_input,
                              input_type, output_type)
    return found
