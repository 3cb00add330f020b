"""A Wait's SubFlow conditions made into the starts of their children, before the database:
the child's flow registered (the exact instance given, as a Dex worker requires it
registered), its start input checked, its SubFlowOptions turned into start options. Any
problem fails the wait_for attempt, as the official SDK fails it when it maps the Wait; what
dex cannot run is refused so, loudly. A child's retry policy retries the child's runs; its
parent hears only the final result (transitions/flow_retry). The
starts themselves are `transitions.subflows.start_children`, in the wait's commit."""

from __future__ import annotations

from typing import Any

from dexcli.engine.definitions import Definitions
from dexcli.engine.start_request import start_request
from dexcli.engine.transitions.subflows import ChildStart, child_flow_id
from dexcli.sdk.conditions import SubFlowCondition
from dexcli.sdk.errors import DexError, InvalidStepResultError, NotSupportedYetError
from dexcli.sdk.results import FlowErrorType, FlowResult, FlowStatus, StartFlowOptions, StepCompletion
from dexcli.sdk.subflow_options import SubFlowOptions


def child_starts(definitions: Definitions, parent_flow_id: str, seid: str,
                 conditions: list[SubFlowCondition]) -> tuple[ChildStart, ...]:
    """The children of a wait's SubFlow conditions (by subFlowIndex)."""
    return tuple(_child(definitions, parent_flow_id, seid, i, c) for i, c in enumerate(conditions))


def _child(definitions: Definitions, parent_flow_id: str, seid: str, index: int, c: SubFlowCondition) -> ChildStart:
    opts = c.options if c.options is not None else SubFlowOptions()
    if not isinstance(opts, SubFlowOptions):
        raise InvalidStepResultError(f"SubFlow.run options must be SubFlowOptions, not {type(opts).__name__}")
    try:
        definition = definitions.registry.definition_of(c.flow)
    except DexError as exc:
        raise InvalidStepResultError(f"SubFlow target: {exc}") from None
    if definition.start_step is None:
        raise InvalidStepResultError(f"SubFlow {definition.flow_type} has no starting Step")
    start = StartFlowOptions(timeout=opts.timeout, timeout_policy=opts.timeout_policy,
                             timeout_handler_options=opts.timeout_handler_options, start_delay=opts.start_delay,
                             retry_policy=opts.retry_policy,  # the child's own runs (transitions/flow_retry)
                             _attribute_initializations=opts.attribute_initializations,
                             config_override=opts.config_override)  # over the parent's (transitions/subflows)
    try:
        request = start_request(definitions, c.flow, child_flow_id(parent_flow_id, seid, index), c.input, None,
                                None, False, start, generated_id=True)
    except NotSupportedYetError:
        raise
    except (ValueError, TypeError, DexError) as exc:
        raise InvalidStepResultError(f"SubFlow {definition.flow_type}: {exc}") from None
    return ChildStart(index, request, opts.reuse_policy.name)




def flow_result(result: dict[str, Any] | None) -> FlowResult:
    """A SubFlow condition's result (transitions.subflow_results.result_of) as the SDK's
    FlowResult; None (the child had not ended when the wait completed): a RUNNING snapshot."""
    if result is None:
        return FlowResult(FlowStatus.RUNNING)
    completions = tuple(StepCompletion(c["stepType"], c["stepExecutionId"], c["output"])
                        for c in result.get("completions", ()))
    error = result.get("errorType")
    return FlowResult(FlowStatus[result["status"]], completions, FlowErrorType[error] if error else None,
                      result.get("errorMessage"))
