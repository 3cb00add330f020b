"""The step a flow's timeout handler runs as: `sys:timeout_handler-<n>`, as Dex names it.

Under the HANDLER policy `Flow.handle_timeout(context)` runs like a step's execute (attempts,
retries, limits, its StepDecision applied), so it is given a StepSpec of its own: not one of
the flow's registered steps (the graph, lint and `go_to` do not see it), found by
`Definitions.step_for` by its type name.
"""

from __future__ import annotations

from typing import Any

from dexcli.sdk.flow import Flow, Step
from dexcli.sdk.handlers import handler_kind
from dexcli.sdk.registry import FlowDefinition, StepSpec

TIMEOUT_STEP = "sys:timeout_handler"


class TimeoutHandler(Step[None]):
    """Calls the flow's handle_timeout with the attempt's context (its form: sync, generator
    or async, is the handler's own: the returned generator or coroutine is driven as such)."""

    def __init__(self, flow: Flow[Any]) -> None:
        self.flow = flow

    def execute(self, context: Any, input: None) -> Any:
        return self.flow.handle_timeout(context)

    def get_step_type(self) -> str:
        return TIMEOUT_STEP


def has_timeout_handler(flow: Flow[Any]) -> bool:
    """Whether the flow overrides Flow.handle_timeout (a positive timeout then defaults to HANDLER)."""
    return getattr(type(flow), "handle_timeout", Flow.handle_timeout) is not Flow.handle_timeout


def timeout_handler_spec(definition: FlowDefinition) -> StepSpec | None:
    """The handler's StepSpec, or None when the flow has no handle_timeout."""
    flow = definition.flow
    if not has_timeout_handler(flow):
        return None
    kind = handler_kind(type(flow).handle_timeout) or "sync"
    return StepSpec(TIMEOUT_STEP, TimeoutHandler(flow), TimeoutHandler, kind, type(None), has_wait_for=False)
