"""Load one flow source under both SDKs and read what each SDK's Registry made of it.

A corpus source is written against dexcli (`from dexcli import ...`, or `from dexcli.wait import
...` for the official SDK's module paths); its `dex` variant is the same text with those import
lines rewritten to `from dex import ...` (`from dex.wait import ...`), which is exactly the move
to a Dex server the README promises. Each variant is executed as its own module.

For an accepted flow, `graph()` gives a plain, comparable description of the registration:
the start step, every step's class and input type, and the options the step runs under. The
official SDK does not resolve options on the client: its worker maps them to what it sends the
server (`WorkerDispatcher.map_step_options`, fields left unset take the server's defaults), so
both sides are brought to the same resolved shape: seconds, Dex's defaults filled in, the
execute-failure route as a step type with the options that step runs under.
"""

from __future__ import annotations

import os
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dexcli
from dexcli.graph.portability import OFFICIAL_MODULES

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
SDKS = ("dexcli", "dex")

# dexcli, or one of the official module paths (dexcli's own modules, such as dexcli.testing, stay)
_IMPORT = re.compile(rf"^from dexcli(\.(?:{'|'.join(map(re.escape, OFFICIAL_MODULES))}))?(?=\s+import\b)", re.M)

# Dex's defaults for options a step leaves unset (StepOptions / RetryPolicy docstrings of the
# official SDK; the server fills them in). dexcli resolves the same ones itself.
DEFAULTS = {
    "method_timeout": 7200.0, "heartbeat_timeout": 60.0, "initial_interval": 1.0,
    "backoff_coefficient": 2.0, "maximum_interval": 100.0, "maximum_attempts": 0, "total_duration": 14400.0,
}


def official() -> Any:
    """The official SDK module, or skip the calling test with the reason (fail instead when
    $DEX_PARITY_REQUIRED is set, as .ci/run does: CI must not pass by skipping)."""
    import pytest

    if os.environ.get("DEX_PARITY_REQUIRED"):
        import dex

        return dex
    return pytest.importorskip(
        "dex", reason="the official Dex SDK is not installed: pip install -e '.[parity]' (dex-python-sdk==1.23.0)")


def sdk_module(sdk: str) -> Any:
    return dexcli if sdk == "dexcli" else official()


def readme_example() -> str:
    """The README's `myflow.py` example, as the README shows it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(# myflow\.py\n.*?)```", text, re.S)
    assert found, "README.md has no ```python block starting with '# myflow.py'"
    return found.group(1)


def for_sdk(source: str, sdk: str) -> str:
    """The source as a flow author would write it for `sdk`: the import line swapped."""
    assert _IMPORT.search(source), "a corpus source imports the SDK with `from dexcli import ...`"
    return source if sdk == "dexcli" else _IMPORT.sub(lambda m: f"from dex{m.group(1) or ''}", source)


_loaded: dict[tuple[str, str], types.ModuleType] = {}


def load(name: str, source: str, sdk: str) -> types.ModuleType:
    """Execute the `sdk` variant of `source` as module `parity_<sdk>_<name>` (once)."""
    key = (name, sdk)
    if key not in _loaded:
        mod_name = f"parity_{sdk}_{name}"
        module = types.ModuleType(mod_name)
        module.__file__ = str(CORPUS / f"{name}.py")
        sys.modules[mod_name] = module  # dataclasses and get_type_hints look modules up
        try:
            exec(compile(for_sdk(source, sdk), module.__file__, "exec"), module.__dict__)
        except BaseException:
            del sys.modules[mod_name]
            raise
        _loaded[key] = module
    return _loaded[key]


def flow_of(module: types.ModuleType, sdk: str) -> Any:
    """An instance of the Flow class the module defines: its last, when it defines several (a
    parent is defined after the SubFlow children it uses)."""
    base = sdk_module(sdk).Flow
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, base) and v is not base and v.__module__ == module.__name__]
    assert classes, f"{module.__name__} defines no Flow class"
    return classes[-1]()


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    message: str = ""
    registry: Any = None
    flow: Any = None


def register(module: types.ModuleType, sdk: str, **registry_kwargs: Any) -> Verdict:
    """Register the module's flow with `sdk`'s Registry (with the module's `CODECS`, when it
    defines them, as codec_registry); a FlowDefinitionError is a rejection,
    anything else it raises is a bug of the test or of that SDK and propagates."""
    flow = flow_of(module, sdk)
    api = sdk_module(sdk)
    if hasattr(module, "CODECS"):  # the module's CodecRegistry, built from its own SDK's names
        registry_kwargs = {**registry_kwargs, "codec_registry": module.CODECS}
    try:
        registry = api.Registry([flow], **registry_kwargs)
    except api.FlowDefinitionError as exc:
        return Verdict(False, str(exc))
    return Verdict(True, registry=registry, flow=flow)


def type_repr(tp: Any, module: types.ModuleType) -> str:
    """A type hint spelled without the variant's module name, comparable across variants."""
    if tp is None or tp is type(None):  # dexcli keeps a None input as None, the official SDK as NoneType
        return "None"
    if isinstance(tp, type) and not getattr(tp, "__args__", None):
        return tp.__qualname__
    return str(tp).replace(f"{module.__name__}.", "").replace("typing.", "")


def graph(verdict: Verdict, sdk: str, module: types.ModuleType) -> dict[str, Any]:
    """The registration of an accepted flow as plain data (see the module docstring)."""
    return _dexcli_graph(verdict, module) if sdk == "dexcli" else _dex_graph(verdict, module)


def _dexcli_graph(verdict: Verdict, module: types.ModuleType) -> dict[str, Any]:
    from dexcli.engine.definitions import Definitions

    definitions = Definitions(verdict.registry)
    definition = verdict.registry.get(verdict.flow.get_flow_type())

    def resolved(opts: Any) -> dict[str, Any]:
        route = opts.failure_step_options
        if opts.failure_step is not None and route is None:  # the route's step runs under its own options
            route = definitions.options(definition, definition.steps[opts.failure_step])
        return {
            "method_timeout": opts.method_timeout, "heartbeat_timeout": opts.heartbeat_timeout,
            "initial_interval": opts.initial_interval, "backoff_coefficient": opts.backoff_coefficient,
            "maximum_interval": opts.maximum_interval, "maximum_attempts": opts.maximum_attempts,
            "total_duration": opts.total_duration, "durability": opts.durability.upper(),
            "failure_step": opts.failure_step,
            "failure_step_options": None if route is None else resolved(route),
        }

    steps = {
        name: {"class": spec.cls.__qualname__, "input": type_repr(spec.input_type, module),
               "options": resolved(definitions.options(definition, spec))}
        for name, spec in definition.steps.items()
    }
    start = definition.start_step.step_type if definition.start_step else None
    return {"flow_type": definition.flow_type, "start": start, "steps": steps}


def _dex_graph(verdict: Verdict, module: types.ModuleType) -> dict[str, Any]:
    from dex._worker_dispatcher import WorkerDispatcher

    registered = verdict.registry._registered_flows[verdict.flow.get_flow_type()]
    mapper = object.__new__(WorkerDispatcher)  # map_step_options needs no connection

    steps = {
        name: {"class": type(rs.step).__qualname__, "input": type_repr(rs.input_type, module),
               "options": _dex_resolved(mapper.map_step_options(registered, rs.step.get_step_options()))}
        for name, rs in registered.steps.items()
    }
    start = registered.start_step.name if registered.start_step else None
    return {"flow_type": registered.name, "start": start, "steps": steps}


def _dex_resolved(pb_opts: Any) -> dict[str, Any]:
    """The official worker's mapped StepOptions with Dex's defaults filled in."""
    out: dict[str, Any] = dict(DEFAULTS, durability="DEFAULT", failure_step=None, failure_step_options=None)
    if pb_opts is None:
        return out
    if pb_opts.execute_timeout_seconds:  # 0 = unset, as dexcli's timedelta(0)
        out["method_timeout"] = float(pb_opts.execute_timeout_seconds)
    if pb_opts.heartbeat_timeout_seconds:
        out["heartbeat_timeout"] = float(pb_opts.heartbeat_timeout_seconds)
    if pb_opts.HasField("execute_retry_policy"):
        retry = pb_opts.execute_retry_policy
        for field, pb_name in (("initial_interval", "initial_interval_seconds"),
                               ("maximum_interval", "maximum_interval_seconds"),
                               ("total_duration", "total_duration_seconds")):
            if getattr(retry, pb_name):
                out[field] = float(getattr(retry, pb_name))
        if retry.backoff_coefficient:
            out["backoff_coefficient"] = float(retry.backoff_coefficient)
        out["maximum_attempts"] = int(retry.maximum_attempts)
    durability = type(pb_opts).DESCRIPTOR.fields_by_name["execute_durability_override"].enum_type
    name = durability.values_by_number[pb_opts.execute_durability_override].name
    out["durability"] = {"STEP_DURABILITY_SYNC": "SYNC", "STEP_DURABILITY_ASYNC": "ASYNC"}.get(name, "DEFAULT")
    if pb_opts.execute_failure_proceed_step_type:
        out["failure_step"] = pb_opts.execute_failure_proceed_step_type
        out["failure_step_options"] = _dex_resolved(pb_opts.execute_failure_proceed_step_options)
    return out
