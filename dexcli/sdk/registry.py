"""Registry: validates flow definitions up front and resolves step references.

Every problem is reported with the flow, the step and what is wrong, all at once. The SDK
imports nothing else of dexcli: checks that read the steps' source (dexcli.graph) are passed
in by the caller, `Registry(checks=static_problems)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dexcli.sdk.channels import Channel, ChannelMap
from dexcli.sdk.codec import CodecRegistry, codec_problem, use_codecs
from dexcli.sdk.conditions import Wait
from dexcli.sdk.decisions import StepDecision
from dexcli.sdk.errors import FlowDefinitionError
from dexcli.sdk.flow import Flow, PersistenceSchema, Step, StepList
from dexcli.sdk.handlers import MISSING, check_handler
from dexcli.sdk.options import StepOptions, option_problems
from dexcli.sdk.rpc import RpcSpec, collect_rpcs
from dexcli.sdk.stream import Stream

_NO_OPTIONS = StepOptions()  # a step without options of its own: one (frozen) value, not ~4 µs to build per call


@dataclass
class StepSpec:
    """What the engine needs to know about one registered step."""

    step_type: str
    instance: Step[Any]
    cls: type
    handler_kind: str  # "sync" | "generator" | "async"
    input_type: Any
    has_wait_for: bool
    wait_kind: str = "sync"  # wait_for's form, when the step has one

    def options(self) -> StepOptions:
        return self.instance.get_step_options() or _NO_OPTIONS


@dataclass
class FlowDefinition:
    flow: Flow[Any]
    flow_type: str
    start_step: StepSpec | None
    steps: dict[str, StepSpec]
    streams: dict[str, Stream[Any]]
    warnings: list[str] = field(default_factory=list)
    channels: dict[str, Any] = field(default_factory=dict)  # name -> Channel | ChannelMap
    rpcs: dict[str, RpcSpec] = field(default_factory=dict)  # RPC name -> spec
    attributes: dict[str, Any] = field(default_factory=dict)  # name -> Attribute | AttributeMap

    def failure_step(self, opts: StepOptions, where: str) -> tuple[StepSpec | None, str | None]:
        """The registered step `opts` routes execute failures to, or why there is none."""
        target = opts.execute_failure_step
        if isinstance(target, Step):
            return None, (f"{where}: on_execute_failure_proceed_to takes a Step class, not an instance: "
                          f"on_execute_failure_proceed_to({_name(target)})")
        rec = self.resolve(target)
        if rec is None:
            return None, f"{where}: on_execute_failure_proceed_to({_name(target)}) names a step that is not registered"
        return rec, None

    def resolve(self, target: Any) -> StepSpec | None:
        """A registered Step class (as the official SDK addresses steps) or a step type name -> its
        StepSpec; None for anything else, a step instance included."""
        if isinstance(target, str):
            return self.steps.get(target)
        for spec in self.steps.values():
            if target is spec.cls:
                return spec
        return None


StaticChecks = Callable[[FlowDefinition], tuple[list[str], list[str]]]
"""Extra checks of a definition that passed the registry's own: (errors, warnings).
dexcli.graph.checks.static_problems is the one dex passes."""


def _inspect_step(flow_type: str, step: Step[Any], problems: list[str],
                  allow_async_handlers: bool = True, codecs: CodecRegistry | None = None) -> StepSpec | None:
    """The official SDK's rules for one step (dexcli.sdk.handlers), and its input's codec."""
    cls = type(step)
    step_type = _user_call(f"flow {flow_type}, step {cls.__name__}", "get_step_type()", step.get_step_type, str)
    where = f"flow {flow_type}, step {step_type}"
    if not step_type.strip():
        problems.append(f"flow {flow_type}, step class {cls.__name__}: get_step_type() is empty "
                        "(durable name is required)")
        return None
    execute = getattr(cls, "execute", None)
    if execute is None or execute is Step.execute:
        problems.append(f"{where}: defines no execute method")
        return None
    found = check_handler(where, "execute", execute, StepDecision, allow_async_handlers=allow_async_handlers)
    problems.extend(found.problems)
    has_wait_for = getattr(cls, "wait_for", Step.wait_for) is not Step.wait_for
    wait_kind = "sync"
    if has_wait_for:
        waits = check_handler(where, "wait_for", cls.wait_for, Wait, allow_async_handlers=allow_async_handlers)
        problems.extend(waits.problems)
        wait_kind = waits.kind
        if MISSING not in (found.input_type, waits.input_type) and waits.input_type != found.input_type:
            problems.append(f"{where}: execute and wait_for must use the same input type "
                            f"({_tname(found.input_type)} and {_tname(waits.input_type)})")
    if found.input_type is MISSING:
        return None
    codec = codec_problem(found.input_type, codecs)
    if codec is not None:
        problems.append(f"{where}: {codec}")
    input_type = None if found.input_type is type(None) else found.input_type
    return StepSpec(step_type, step, cls, found.kind, input_type, has_wait_for, wait_kind)


def _check_options(flow_type: str, spec: StepSpec, definition: FlowDefinition, problems: list[str],
                   warnings: list[str]) -> None:
    where = f"flow {flow_type}, step {spec.step_type}"
    try:
        opts = spec.options()
    except Exception as exc:  # user code
        problems.append(f"{where}: get_step_options raised {type(exc).__name__}: {exc}")
        return
    if not isinstance(opts, StepOptions):
        problems.append(f"{where}: get_step_options must return StepOptions, got {type(opts).__name__}")
        return
    problems.extend(option_problems(opts, where))
    if opts.execute_failure_step_options is not None:
        problems.extend(option_problems(opts.execute_failure_step_options, f"{where} (its execute-failure options)"))
    # The official Registry checks no failure route: a route it cannot map fails when the step is
    # scheduled (its options are mapped then), a recovery step of another input type when the route
    # is taken (the failed step's input does not decode). dex does the same, and warns here.
    if opts.execute_failure_step is not None:
        rec, problem = definition.failure_step(opts, where)
        if rec is None:
            warnings.append(f"{problem}: scheduling {spec.step_type} will fail")
        elif rec.input_type != spec.input_type:
            warnings.append(
                f"{where}: recovery step {rec.step_type} takes {_tname(rec.input_type)}, "
                f"but {spec.step_type} takes {_tname(spec.input_type)}; the recovery step gets the same input, "
                f"so it fails if that input does not decode as {_tname(rec.input_type)}"
            )


def _name(target: Any) -> str:
    if isinstance(target, type):
        return target.__name__
    return type(target).__name__


def _tname(tp: Any) -> str:
    if tp is None:
        return "None"
    return getattr(tp, "__name__", None) or str(tp)


def _user_call(where: str, what: str, fn: Any, expected: type | None = None) -> Any:
    """Call a definition method of the user's code; its failure is a definition error."""
    try:
        value = fn()
    except Exception as exc:
        raise FlowDefinitionError(f"{where}: {what} raised {type(exc).__name__}: {exc}") from exc
    if expected is not None and not isinstance(value, expected):
        raise FlowDefinitionError(f"{where}: {what} must return {expected.__name__}, got {type(value).__name__}")
    return value


def _collect_steps(flow_type: str, step_list: StepList[Any], problems: list[str], allow_async_handlers: bool,
                   codecs: CodecRegistry | None = None) -> tuple[dict[str, StepSpec], StepSpec | None]:
    """The flow's steps by step type, and the start step's spec."""
    steps: dict[str, StepSpec] = {}
    classes: dict[type, str] = {}
    start_spec: StepSpec | None = None
    for i, step in enumerate(step_list.all_steps()):
        if not isinstance(step, Step):
            problems.append(f"flow {flow_type}: {step!r} is not a Step instance")
            continue
        spec = _inspect_step(flow_type, step, problems, allow_async_handlers, codecs)
        if spec is None:
            continue
        if spec.step_type in steps:
            problems.append(f"flow {flow_type}: duplicate step type {spec.step_type}")
            continue
        if spec.cls in classes:
            problems.append(
                f"flow {flow_type}: duplicate step class {spec.cls.__name__} "
                f"(as {classes[spec.cls]} and {spec.step_type}); go_to addresses steps by class"
            )
            continue
        classes[spec.cls] = spec.step_type
        steps[spec.step_type] = spec
        if i == 0 and step_list.start is not None:
            start_spec = spec
    return steps, start_spec


def _collect_streams(flow_type: str, schema: PersistenceSchema, problems: list[str]) -> dict[str, Stream[Any]]:
    names: set[str] = set()
    streams: dict[str, Stream[Any]] = {}
    for d in schema.all():
        name = getattr(d, "name", "")
        if name in names:
            problems.append(f"flow {flow_type}: persistence name {name!r} is declared twice")
        names.add(name)
        if isinstance(d, Stream):
            streams[name] = d
    return streams


def _check_timeout_handler(flow_type: str, flow: Flow[Any], problems: list[str], allow_async_handlers: bool) -> None:
    """An overridden Flow.handle_timeout takes only the context and returns StepDecision."""
    handler = getattr(type(flow), "handle_timeout", Flow.handle_timeout)
    if handler is not Flow.handle_timeout:
        problems.extend(check_handler(f"flow {flow_type}", "handle_timeout", handler, StepDecision,
                                      allow_async_handlers=allow_async_handlers, takes_input=False).problems)


def build_definition(flow: Flow[Any], *, checks: StaticChecks | None = None,
                     allow_async_handlers: bool = True, codecs: CodecRegistry | None = None) -> FlowDefinition:
    """Validate one flow; raise FlowDefinitionError listing every problem found.

    `checks` run last, only when every other check passed: their errors fail the
    definition, their warnings are kept on it. Without `checks` none run.
    `allow_async_handlers` defaults to what dex runs (async handlers, as an AsyncWorker);
    `Registry` defaults to the official SDK's False. `codecs`: the codecs step inputs may use
    (the official SDK's built-ins without it).
    """
    if isinstance(flow, type):
        raise FlowDefinitionError(f"{flow.__name__}: register an instance of the flow, not the class")
    if not isinstance(flow, Flow):
        raise FlowDefinitionError(f"{type(flow).__name__} is not a dex Flow")
    problems: list[str] = []
    flow_type = _user_call(f"flow {type(flow).__name__}", "get_flow_type()", flow.get_flow_type, str)
    if not flow_type.strip() or any(c in flow_type for c in "/$:"):
        problems.append(f"flow type {flow_type!r} must be non-empty and contain no '/', '$' or ':'")
    step_list = _user_call(f"flow {flow_type}", "get_steps()", flow.get_steps, StepList)
    steps, start_spec = _collect_steps(flow_type, step_list, problems, allow_async_handlers, codecs)
    _check_timeout_handler(flow_type, flow, problems, allow_async_handlers)
    schema = _user_call(f"flow {flow_type}", "get_persistence_schema()", flow.get_persistence_schema,
                        PersistenceSchema)
    streams = _collect_streams(flow_type, schema, problems)
    channels = {c.name: c for c in schema.all() if isinstance(c, (Channel, ChannelMap))}
    attributes = {a.name: a for a in schema.attributes}
    rpc_problems: list[str] = []
    rpcs = collect_rpcs(flow, rpc_problems, allow_async=allow_async_handlers)
    problems.extend(f"flow {flow_type}: {p}" for p in rpc_problems)
    definition = FlowDefinition(flow, flow_type, start_spec, steps, streams, channels=channels, rpcs=rpcs,
                                attributes=attributes)
    for spec in steps.values():
        _check_options(flow_type, spec, definition, problems, definition.warnings)
    if checks is not None and not problems:
        errors, warnings = checks(definition)
        problems.extend(errors)
        definition.warnings.extend(warnings)
    if problems:
        raise FlowDefinitionError(problems)
    return definition


class Registry:
    """Flows this process can run, by flow type. Validates each flow when it is added, by the
    official SDK's rules (and dexcli's own, stricter ones: a heartbeat timeout of 10 s or more).
    A flow without a start step registers (RPCs start its steps); a failure route the official
    Registry would take but a worker cannot follow registers with a warning (`definition.warnings`).

    `allow_async_handlers` defaults to False, as the official SDK's: `async def` handlers are
    refused unless it is True (as for an AsyncWorker; `dex run` and DexTestEnv pass True).
    `checks`: extra checks each flow must pass (dex passes dexcli.graph.checks.static_problems);
    none run without it. `codec_registry`: the codecs of the flows' types, as the official SDK's
    (CodecRegistry() without it); its custom codecs are used for values of their types.
    """

    def __init__(self, flows: Iterable[Flow[Any]] | None = None, codec_registry: CodecRegistry | None = None, *,
                 checks: StaticChecks | None = None, allow_async_handlers: bool = False) -> None:
        if codec_registry is not None and not isinstance(codec_registry, CodecRegistry):
            raise TypeError(f"Registry(codec_registry=...) takes a CodecRegistry, not {type(codec_registry).__name__}")
        self.codec_registry = codec_registry or CodecRegistry()
        use_codecs(self.codec_registry)
        self.checks = checks
        self.allow_async_handlers = allow_async_handlers
        self._defs: dict[str, FlowDefinition] = {}
        for f in flows or ():
            self.add(f)

    def add(self, flow: Flow[Any]) -> FlowDefinition:
        definition = build_definition(flow, checks=self.checks, allow_async_handlers=self.allow_async_handlers,
                                      codecs=self.codec_registry)
        existing = self._defs.get(definition.flow_type)
        if existing is not None and existing.flow is not flow:
            raise FlowDefinitionError(f"flow type {definition.flow_type} is registered twice")
        self._defs[definition.flow_type] = definition
        return definition

    def get(self, flow_type: str) -> FlowDefinition | None:
        return self._defs.get(flow_type)

    def definition_of(self, flow: Flow[Any]) -> FlowDefinition:
        """The definition to start `flow` with. Another instance of a registered flow's class
        names that flow: the registered instance runs (as a Dex worker's would), so
        `start_flow(MyFlow(), ...)` may be called with a fresh instance each time."""
        for d in self._defs.values():
            if d.flow is flow:
                return d
        for d in self._defs.values():
            if type(d.flow) is type(flow):
                return d
        return self.add(flow)

    def __iter__(self) -> Iterator[FlowDefinition]:
        return iter(self._defs.values())
