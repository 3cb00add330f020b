"""SubFlowOptions and SubFlowReusePolicy: how a SubFlow condition starts (or reuses) its child
flow. Names, fields and defaults as the official SDK's `dex.flow_options`."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from dexcli.sdk.attributes import initialization
from dexcli.sdk.options import RetryPolicy
from dexcli.sdk.results import FlowTimeoutHandlerOptions, FlowTimeoutPolicy


class SubFlowReusePolicy(enum.Enum):
    """What a SubFlow start does when its generated flow id already has a run (as Dex):

        existing child        ATTACH              RESTART_IF_PREVIOUS_EXITS_ABNORMALLY   ALWAYS_RESTART
        none                  start               start                                  start
        running               attach              attach                                 terminate, start
        completed             its result          its result                             start
        failed/canceled/...   its result          start                                  start
    """

    ATTACH = "attach"
    RESTART_IF_PREVIOUS_EXITS_ABNORMALLY = "restart_if_previous_exits_abnormally"
    ALWAYS_RESTART = "always_restart"


@dataclass(frozen=True)
class SubFlowOptions:
    """One SubFlow condition's start: StartFlowOptions' timeout, timeout policy and handler
    options, start delay and initial attributes, plus the reuse policy and the condition id
    (needed by Wait.any_combination_of). The child's flow id is generated
    (`SubFlow:<parent>-<stepExecutionId>-<index>`). dex refuses, when the wait is committed,
    what it cannot run: a whole-flow `retry_policy` and a `config_override`."""

    timeout: timedelta | None = None
    timeout_policy: FlowTimeoutPolicy = FlowTimeoutPolicy.DEFAULT
    timeout_handler_options: FlowTimeoutHandlerOptions | None = None
    start_delay: timedelta | None = None
    retry_policy: RetryPolicy | None = None
    # (Attribute or AttributeMap, instance or None, value), in the order given: with_attribute
    _attribute_initializations: tuple[tuple[Any, str | None, Any], ...] = field(default=(), repr=False)
    config_override: Any = None  # a FlowConfig
    reuse_policy: SubFlowReusePolicy = SubFlowReusePolicy.RESTART_IF_PREVIOUS_EXITS_ABNORMALLY
    condition_id: str | None = None

    def with_attribute(self, attribute: Any, /, *args: object) -> SubFlowOptions:
        """A copy with one initial attribute value of the child: `(attribute, value)`, or
        `(attribute_map, instance, value)` for an AttributeMap."""
        init = initialization(attribute, args)
        return dataclasses.replace(self, _attribute_initializations=self._attribute_initializations + (init,))

    @property
    def attribute_initializations(self) -> tuple[tuple[Any, str | None, Any], ...]:
        return self._attribute_initializations
