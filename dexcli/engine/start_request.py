"""What a flow's start needs before any database work: the flow id (given or generated), the
start step's input checked against its type, the step's resolved options and the start options
(StartFlowOptions as dexcli.engine.flow_timeout and the initial attributes apply them). A flow
without a start step takes None and starts with no step."""

from __future__ import annotations

import os
from typing import Any

from dexcli.engine import transitions as t
from dexcli.engine.attributes import initial_attributes
from dexcli.engine.definitions import Definitions
from dexcli.engine.flow_timeout import start_settings
from dexcli.sdk.codec import encode, from_jsonable, to_jsonable
from dexcli.sdk.errors import FlowDefinitionError, InvalidStepResultError, NotSupportedYetError, ValueMappingError
from dexcli.sdk.flow import Flow
from dexcli.sdk.options import ResolvedOptions
from dexcli.sdk.registry import FlowDefinition, StepSpec
from dexcli.sdk.results import StartFlowOptions


def new_flow_id(flow_type: str) -> str:
    """The id a flow gets when none is given: `polling-3f9a1c` for PollingFlow."""
    base = flow_type.lower().removesuffix("flow") or "flow"
    return f"{base}-{os.urandom(3).hex()}"  # six random hex digits, as uuid4().hex[:6] gave (without the UUID)


class InvalidFlowIdError(ValueMappingError):
    """A flow id dex cannot store (empty, or with '/', '$' or ':'), or one it will not print: with a
    control or other non-printable character (ESC, BEL, a newline), which every view that shows
    the id would send to the terminal."""


def _flow_id_problem(flow_id: str) -> str | None:
    if not flow_id or "/" in flow_id or "$" in flow_id or ":" in flow_id:
        return "must be non-empty and contain no '/', '$' or ':'"
    if flow_id.isprintable():  # every start asks: the usual answer without a loop over its characters
        return None
    bad = next((c for c in flow_id if not c.isprintable()), None)
    if bad is not None:
        return f"contains the non-printable character {bad!r} (U+{ord(bad):04X}): use letters, digits and punctuation"
    return None


def check_flow_id(flow_id: str) -> str:
    """The flow id, if dex can store and print it (an empty one is refused, not replaced by a new one)."""
    problem = _flow_id_problem(flow_id)
    if problem is not None:
        raise InvalidFlowIdError(f"flow id {flow_id!r} {problem}")
    return flow_id


def start_step_options(definitions: Definitions, definition: FlowDefinition, start: StepSpec) -> ResolvedOptions:
    """The start step's resolved options. Options a worker cannot map (a failure route to no
    registered step class) refuse the start, as the official client refuses it: a
    FlowDefinitionError."""
    try:
        return definitions.options(definition, start)
    except InvalidStepResultError as exc:
        raise FlowDefinitionError(f"{exc}: the start is refused") from None


def start_request(definitions: Definitions, flow: Flow[Any], flow_id: str | None, input: Any,
                  flow_ref: str | None, request_id: str | None, ignore_already_started: bool,
                  options: StartFlowOptions | None = None, *, generated_id: bool = False) -> t.StartRequest:
    """Everything about a start that needs no database: checks, input, options (its request id
    and ignore_already_started replace the arguments'). `generated_id`: the flow id is one dex
    made in its reserved form (a SubFlow's `SubFlow:...`), not a user's."""
    definition = definitions.registry.definition_of(flow)
    start = definition.start_step
    if not generated_id:
        flow_id = check_flow_id(new_flow_id(definition.flow_type) if flow_id is None else flow_id)
    assert flow_id is not None
    nxt: t.NextStep | None = None
    if start is None:  # it idles until an RPC starts a step, as on a Dex server
        if input is not None:
            raise ValueMappingError(f"flow {definition.flow_type} has no start step: its start input must be None, "
                                    f"not {type(input).__name__}")
    else:
        try:
            input_json = encode(from_jsonable(to_jsonable(input), start.input_type))
        except ValueMappingError as exc:
            raise ValueMappingError(f"input for {start.step_type}: {exc}") from None
        nxt = t.NextStep(start, input_json, start_step_options(definitions, definition, start))
    if options is None:
        return t.StartRequest(definition, nxt, flow_id, flow_ref, request_id, ignore_already_started)
    settings = start_settings(options, definition, definitions)
    initial = initial_attributes(definition, options) if options.attribute_initializations else {}
    if initial and settings.retry_policy is not None:
        special = [w.key for w in initial.values() if w.index is not None or w.sync or w.hard]
        if special:  # a retry run writes its start's initial values again without the flow's definition
            raise NotSupportedYetError(
                f"StartFlowOptions(retry_policy=...) with an initial value of {special[0]} (indexed, synced to "
                "an Attribute Store or hard-delete-on-null): dex cannot write it again in a retry run yet")
    return t.StartRequest(definition, nxt, flow_id, flow_ref, options.request_id,
                          options.ignore_already_started, settings, initial)
