"""A flow's timeout (StartFlowOptions.timeout, FlowTimeoutPolicy, Flow.handle_timeout) and
the start options that go with it, as Dex applies them.

The timeout is one durable time on the flow row (`timeout_at` = start + start delay + timeout:
a Dex server counts it from the end of the delay): the scheduler's one schedule read includes
it, `Engine.claim` fires what is due through `flow_timeout`, so it survives restarts and
`--time-skip` / virtual time jump to it.

    FAIL     the flow FAILED with FLOW_TIMEOUT, "Flow timed out after N seconds"
    CANCEL   the flow CANCELED with the same message
    HANDLER  `sys:timeout_handler-1` is queued: handle_timeout runs as a step's execute
             (its limits and retries from FlowTimeoutHandlerOptions) and its decision applies

Open step executions under FAIL and CANCEL end CANCELED with their attempts fenced, as when a
client stops the flow (Dex closes the run; nothing of it runs on). Under HANDLER they go on:
the handler's decision decides (force_complete / force_fail end them, graceful_complete waits
for them). A flow that ends before its timeout never sees it.
"""

from __future__ import annotations

from datetime import timedelta

from dexcli.engine.definitions import Definitions
from dexcli.engine.flow_config import start_config
from dexcli.engine.retry_policy import policy_json
from dexcli.engine.timeout_step import has_timeout_handler, timeout_handler_spec
from dexcli.sdk.errors import NotSupportedYetError
from dexcli.sdk.options import ResolvedOptions, StepOptions, fits_seconds32
from dexcli.sdk.registry import FlowDefinition
from dexcli.sdk.results import FlowTimeoutHandlerOptions, FlowTimeoutPolicy, StartFlowOptions
from dexcli.store import StartSettings


def seconds(duration: timedelta | None, what: str) -> float | None:
    """A start option's duration in seconds, checked as the official SDK checks it."""
    if duration is None:
        return None
    if not isinstance(duration, timedelta):
        raise TypeError(f"StartFlowOptions({what}=...) takes a timedelta, not {type(duration).__name__}")
    value = duration.total_seconds()
    if not fits_seconds32(value):
        raise ValueError(f"StartFlowOptions({what}=...): duration must be whole seconds within int32")
    return value


def resolve_policy(definition: FlowDefinition, timeout: float | None, policy: FlowTimeoutPolicy) -> str | None:
    """The policy a start applies (the official SDK's rule), by name; None without a timeout."""
    if not timeout:
        if policy is not FlowTimeoutPolicy.DEFAULT:
            raise ValueError("Flow timeout policy requires a positive timeout")
        return None
    handler = has_timeout_handler(definition.flow)
    if policy is FlowTimeoutPolicy.DEFAULT:
        return "HANDLER" if handler else "FAIL"
    if policy is FlowTimeoutPolicy.HANDLER and not handler:
        raise ValueError(f"Flow {definition.flow_type} has no handle_timeout override")
    return policy.name


def start_settings(options: StartFlowOptions, definition: FlowDefinition, definitions: Definitions) -> StartSettings:
    """What a start stores of its options, checked before anything is written."""
    timeout = seconds(options.timeout, "timeout")
    delay = seconds(options.start_delay, "start_delay")
    policy = resolve_policy(definition, timeout, options.timeout_policy)
    handler_json = None
    if options.timeout_handler_options is not None:
        if policy != "HANDLER":
            raise ValueError("timeout handler options require a positive timeout with HANDLER policy")
        handler_json = _handler_options(options.timeout_handler_options, definition, definitions).to_json()
    return StartSettings(timeout or None, policy, handler_json, delay or None, options.id_reuse_policy.name,
                         start_config(options.config_override),
                         policy_json(options.retry_policy, "StartFlowOptions"))


def _handler_options(o: FlowTimeoutHandlerOptions, definition: FlowDefinition, definitions: Definitions
                     ) -> ResolvedOptions:
    loads = [n for n in ("lock_attributes", "load_attribute_maps", "load_attribute_map_instances", "load_channels",
                         "load_channel_maps", "load_channel_map_instances") if getattr(o, n)]
    if loads:
        raise NotSupportedYetError(f"FlowTimeoutHandlerOptions({', '.join(loads)}): dex does not apply this yet; "
                                   "the flow was not started")
    spec = timeout_handler_spec(definition)
    assert spec is not None  # the HANDLER policy needs handle_timeout
    opts = StepOptions(execute_method_timeout=o.method_timeout, heartbeat_timeout=o.heartbeat_timeout,
                       execute_retry=o.retry, execute_durability=o.durability)
    if o._failure_target is not None:
        opts = opts.on_execute_failure_proceed_to(o._failure_target, o._failure_options)
    return definitions.options(definition, spec, opts)
