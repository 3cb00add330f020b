"""The flow definitions this process knows, and the options each step runs under.

A run started by another process names its flow by a reference (`name:polling`,
`file:/path.py:NAME`); `loader`, given by whoever builds the engine, turns one into a Flow, or
into the flows of a Registry (all registered at once: the next run of one of them loads nothing).
A flow that cannot be loaded is remembered as unloadable (with why) and skipped.

A SubFlow child is stored with its parent's reference: loading it registers the flows the
reference gives and, when the child's type is not among them, the Flow instances those flows
and their steps hold (a parent step given its target flow, as Dex's examples build them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from dexcli.engine.timeout_step import TIMEOUT_STEP, timeout_handler_spec
from dexcli.sdk.codec import adapter
from dexcli.sdk.errors import DexError, FlowDefinitionError, InvalidStepResultError
from dexcli.sdk.flow import Flow
from dexcli.sdk.options import ResolvedOptions, StepOptions, resolve_options
from dexcli.sdk.registry import FlowDefinition, Registry, StepSpec

Loader = Callable[[str], Flow[Any] | Sequence[Flow[Any]]]


class FlowNotRegisteredError(DexError):
    """A run's flow type is not registered here and no loader can bring it in."""

    exit_code = 2


def cannot_run(flow_id: str, reason: str) -> FlowNotRegisteredError:
    """The refusal of a drive of a flow whose code this process cannot run."""
    return FlowNotRegisteredError(f"cannot run flow {flow_id}: {reason}")


class Definitions:
    def __init__(self, registry: Registry, loader: Loader | None = None) -> None:
        self.registry = registry
        self.loader = loader
        self.unloadable: dict[str, str] = {}  # flow id -> why its code cannot be loaded
        self._options: dict[tuple[str, Any], ResolvedOptions] = {}
        # the last StepOptions object each step resolved, and its resolved options: the same
        # object again (most steps return one) is answered without the hash of its every field
        self._last: dict[tuple[str, str], tuple[StepOptions, ResolvedOptions]] = {}
        self._prepared: set[str] = set()

    def prepare(self) -> None:
        """Build what decoding the registered flows' values needs (pydantic, and a validator
        per step input and channel value type) now: a worker pays for it at start-up, not in
        its first flows' latency. Cheap when nothing new was registered."""
        for definition in self.registry:
            if definition.flow_type not in self._prepared:
                self._prepared.add(definition.flow_type)
                _prepare(definition)

    def get(self, flow_type: str, flow_ref: str | None) -> FlowDefinition:
        d = self.registry.get(flow_type)
        if d is not None:
            return d
        if flow_ref and self.loader is not None:
            loaded = self.loader(flow_ref)
            flows = (loaded,) if isinstance(loaded, Flow) else tuple(loaded)
            added = [self._add(flow) for flow in flows]
            if self.registry.get(flow_type) is None:
                added += [self._add(flow) for flow in held_flows(flows)]
            self.prepare()
            d = self.registry.get(flow_type)
            if d is None:
                raise FlowDefinitionError(f"{flow_ref} now defines {', '.join(added)}, not {flow_type}")
            return d
        raise FlowNotRegisteredError(f"flow type {flow_type} is not registered in this process")

    def loadable(self, flow_type: str, flow_ref: str | None) -> FlowDefinition | None:
        """The definition, or None when its code cannot be loaded here (what cannot is not kept)."""
        try:
            return self.get(flow_type, flow_ref)
        except DexError:
            return None

    def _add(self, flow: Flow[Any]) -> str:
        """Register a loaded flow unless its type already is (a Registry's other flows may have
        been registered from another load of the same reference); returns its flow type."""
        try:
            known = self.registry.get(flow.get_flow_type())
        except Exception:  # noqa: BLE001 - the registry's add says what is wrong with it
            known = None
        return known.flow_type if known is not None else self.registry.add(flow).flow_type

    def step_for(self, flow_id: str, flow_type: str, flow_ref: str | None,
                 step_type: str) -> tuple[FlowDefinition, StepSpec] | None:
        """The definition and step a queued step runs, or None (the flow is then unloadable)."""
        try:
            definition = self.get(flow_type, flow_ref)
        except DexError as exc:
            self.unloadable[flow_id] = str(exc)
            return None
        spec = definition.steps.get(step_type)
        if spec is None and step_type == TIMEOUT_STEP:
            spec = timeout_handler_spec(definition)
        if spec is None:
            self.unloadable[flow_id] = (f"step {step_type} is no longer in the flow (to go on with the code "
                                        f"as it is: dex time-travel {flow_id} --to-step STEP, a step it has, "
                                        "or --to-start)")
            return None
        return definition, spec

    def options(self, definition: FlowDefinition, spec: StepSpec, opts: StepOptions | None = None
                ) -> ResolvedOptions:
        """The resolved options of `spec` (its own, or `opts` from a movement), cached per flow
        type and StepOptions value."""
        opts = spec.options() if opts is None else opts
        last = self._last.get((definition.flow_type, spec.step_type))
        if last is not None and last[0] is opts:
            return last[1]
        key = (definition.flow_type, _identity(opts))
        try:
            hit = self._options.get(key)
        except TypeError:  # an unhashable option value: resolve every time
            return self._resolve(definition, spec, opts)
        if hit is None:
            hit = self._options[key] = self._resolve(definition, spec, opts)
        self._last[(definition.flow_type, spec.step_type)] = (opts, hit)
        return hit

    def _resolve(self, definition: FlowDefinition, spec: StepSpec, opts: StepOptions) -> ResolvedOptions:
        where = f"flow {definition.flow_type}, step {spec.step_type}"
        failure, failure_opts = None, None
        if opts.execute_failure_step is not None:
            target, problem = definition.failure_step(opts, where)
            if target is None:
                raise InvalidStepResultError(str(problem))
            failure = target.step_type
            if opts.execute_failure_step_options is not None:
                failure_opts = self._resolve(definition, target, opts.execute_failure_step_options)
        try:
            return resolve_options(opts, where, failure, failure_opts)
        except ValueError as exc:
            raise InvalidStepResultError(str(exc)) from None


def held_flows(flows: Sequence[Flow[Any]], depth: int = 3) -> list[Flow[Any]]:
    """The Flow instances `flows` and their steps hold in their attributes (SubFlow targets),
    to `depth` levels, each once."""
    seen: set[int] = {id(f) for f in flows}
    found: list[Flow[Any]] = []
    level = list(flows)
    for _ in range(depth):
        nxt: list[Flow[Any]] = []
        for flow in level:
            holders: list[Any] = [flow]
            with contextlib.suppress(Exception):  # a flow whose steps cannot be listed: its own attributes only
                holders += list(flow.get_steps().all_steps())
            for holder in holders:
                for value in getattr(holder, "__dict__", {}).values():
                    if isinstance(value, Flow) and id(value) not in seen:
                        seen.add(id(value))
                        nxt.append(value)
        found += nxt
        level = nxt
    return found


def _prepare(definition: FlowDefinition) -> None:
    types = [spec.input_type for spec in definition.steps.values()]
    types += [getattr(channel, "value_type", None) for channel in definition.channels.values()]
    for tp in types:
        if tp is not None and tp is not Any:
            try:
                adapter(tp)
            except Exception:  # noqa: BLE001 - a type pydantic cannot take fails where it is used, as before
                continue


def _identity(opts: StepOptions | None) -> Any:
    """A cache key for StepOptions that tells execute-failure routes apart (StepOptions'
    equality leaves them out)."""
    if opts is None:
        return None
    return (opts, opts.execute_failure_step, _identity(opts.execute_failure_step_options))
