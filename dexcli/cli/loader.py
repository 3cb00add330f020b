"""Find a flow by name (`polling`: an installed flow plugin) or by file (`path/to/module.py:NAME`).

NAME is a Flow class (created with no arguments), a Flow instance, or a function taking no
arguments that returns a Flow or a Registry: real apps build their flows with their services,
and such a function is how they say so. A Registry's flows all register; a command that runs
one flow picks it by its flow type (the flow argument) when the Registry holds several.

The reference a flow was loaded from is stored with each run (`name:polling`,
`file:/abs/path.py:NAME`), so `dex resume` and `dex worker` in another process can load the
same code (calling the function again): `ref_flows` is the loader the CLI gives its engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from pathlib import Path
from typing import Any

from dexcli.cli.discovery import installed
from dexcli.cli.errors import NotFoundError, UsageError
from dexcli.plugins import FlowPlugin
from dexcli.sdk.flow import Flow
from dexcli.sdk.registry import Registry

WHAT_NAME_IS = "a dex Flow class or instance, or a function returning a Flow or a Registry"


def _instantiate(obj: Any, where: str) -> Flow[Any]:
    """The one flow `obj` gives (plugins name one flow)."""
    flows = _flows_of(obj, where)
    if len(flows) != 1:
        raise UsageError(f"{where} gives {len(flows)} flows ({_types(flows)}); a flow plugin names one")
    return flows[0]


def _flows_of(obj: Any, where: str) -> tuple[Flow[Any], ...]:
    """The flows a module attribute gives: a Flow instance, a Flow class created with no
    arguments, or what a function of no arguments returns (a Flow, or a Registry's flows)."""
    if isinstance(obj, Flow):
        return (obj,)
    if isinstance(obj, type):
        if not issubclass(obj, Flow):
            raise UsageError(f"{where} is not {WHAT_NAME_IS}")
        _check_no_arguments(obj, where, "cannot create the flow with no arguments")
        return (_call(obj, where),)
    if not callable(obj):
        raise UsageError(f"{where} is not {WHAT_NAME_IS}")
    _check_no_arguments(obj, where, "cannot call it with no arguments, as dex does")
    made = _call(obj, where)
    if inspect.isawaitable(made):
        getattr(made, "close", lambda: None)()  # never awaited: closed, so no warning follows the error
        raise UsageError(f"{where} is async: dex calls it without awaiting; make it a plain def returning the flow")
    if isinstance(made, Flow):
        return (made,)
    if isinstance(made, Registry):
        flows = tuple(d.flow for d in made)
        if not flows:
            raise UsageError(f"{where}() returned a Registry with no flows")
        return flows
    if isinstance(made, type) and issubclass(made, Flow):
        raise UsageError(f"{where}() returned the class {made.__name__}: return an instance of it")
    raise UsageError(f"{where}() returned {type(made).__name__}, not a Flow or a Registry")


def _check_no_arguments(obj: Any, where: str, refusal: str) -> None:
    try:
        inspect.signature(obj).bind()
    except TypeError as exc:  # it needs arguments: `dex` has none to give
        raise UsageError(f"{where}: {refusal} ({exc})") from None
    except ValueError:  # no signature to check: try it
        pass


def _call(obj: Any, where: str) -> Any:
    try:
        return obj()
    except Exception as exc:
        raise UsageError(f"{where}: creating the flow failed: {raised(exc)}") from None


def _types(flows: tuple[Flow[Any], ...]) -> str:
    return ", ".join(_flow_type(f) for f in flows)


def _flow_type(flow: Flow[Any]) -> str:
    try:
        return str(flow.get_flow_type())
    except Exception:  # the registry reports it when the flow is added
        return type(flow).__name__


def raised(exc: BaseException) -> str:
    """`Type: message (at file:line)`, the line of the user's code that raised it, for one-line errors."""
    from dexcli.engine.user_code import exception_place
    from dexcli.graph.lint import short_path

    place = exception_place(exc)
    return f"{type(exc).__name__}: {exc}" + (f" (at {short_path(place)})" if place else "")


def _import_line(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{path}:{exc.lineno}: {exc.msg}"
    if frames:
        f = frames[-1]
        return f"{path}:{f.lineno}: {type(exc).__name__}: {exc}"
    return f"{path}: {type(exc).__name__}: {exc}"


def load_file_flows(spec: str) -> tuple[Flow[Any], ...]:
    """`path/to/module.py:NAME`: the flows NAME gives (see the module's docstring)."""
    path_s, sep, attr = spec.rpartition(":")
    if not sep or not path_s or not attr:
        raise UsageError(f"--file expects path/to/module.py:FlowClass, got {spec!r}")
    path = Path(path_s).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"--file: no such file: {path_s}")
    mod_name = f"dex_user_{abs(hash(str(path)))}"
    if mod_name in sys.modules:
        module = sys.modules[mod_name]
    else:
        if str(path.parent) not in sys.path:
            # last: the flow's own modules beside it import, but a file there named like a module
            # dex imports later (decimal, tempfile) does not take that module's place
            sys.path.append(str(path.parent))
        try:
            module_spec = importlib.util.spec_from_file_location(mod_name, path)
            assert module_spec is not None and module_spec.loader is not None
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[mod_name] = module
            module_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(mod_name, None)
            raise UsageError(f"--file: importing failed: {_import_line(exc, path)}") from exc
    if not hasattr(module, attr):
        raise UsageError(f"--file: {path_s} has no {attr}")
    return _flows_of(getattr(module, attr), f"{path_s}:{attr}")


def file_ref(spec: str) -> str:
    """The reference stored with the runs of a flow loaded from `spec`."""
    path_s, _, attr = spec.rpartition(":")
    return f"file:{Path(path_s).expanduser().resolve()}:{attr}"


def pick_flow(flows: tuple[Flow[Any], ...], name: str | None, spec: str) -> Flow[Any]:
    """The flow of `--file spec` a command runs: its only one, or the one named by flow type
    (a Registry of several)."""
    if name is None:
        if len(flows) == 1:
            return flows[0]
        raise UsageError(f"--file {spec} gives {len(flows)} flows ({_types(flows)}): name the one to use by its "
                         f"flow type, as the flow argument (e.g. `{_flow_type(flows[0])} --file {spec}`)")
    for flow in flows:
        if _flow_type(flow) == name:
            return flow
    if len(flows) == 1:
        raise UsageError("give a flow name or --file, not both (a name with --file picks one flow of a Registry)")
    raise UsageError(f"--file {spec} has no flow {name!r}; its flows: {_types(flows)}")


def known_flows() -> dict[str, FlowPlugin]:
    """The flows `dex run` knows by name: one per installed flow plugin, in name order."""
    return installed().plugins


def plugin_flow(plugin: FlowPlugin) -> Flow[Any]:
    """A new instance of the plugin's flow (imported now if it is named by "module:attr")."""
    obj = plugin.flow
    if isinstance(obj, str):
        module_name, _, attr = obj.partition(":")
        try:
            found: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                found = getattr(found, part)
        except Exception as exc:
            raise UsageError(f"{plugin.target}: loading the flow failed: {raised(exc)}") from None
        return _instantiate(found, plugin.target)
    return _instantiate(obj, plugin.target)


def named_plugin(name: str) -> FlowPlugin:
    plugin = known_flows().get(name)
    if plugin is None:
        names = ", ".join(known_flows())
        raise NotFoundError(f"unknown flow {name!r}; known flows: {names} (or use --file path.py:Class)")
    return plugin


def load_named_flow(name: str) -> Flow[Any]:
    return plugin_flow(named_plugin(name))


def load_flow(name: str | None = None, file: str | None = None) -> tuple[Flow[Any], str]:
    """Return the flow and the reference to store with its runs (`name:…` or `file:path:NAME`)."""
    if file:
        return pick_flow(load_file_flows(file), name, file), file_ref(file)
    if not name:
        raise UsageError("name a flow (see `dex flows`) or pass --file path.py:Class")
    return load_named_flow(name), f"name:{name}"


def ref_flows(ref: str) -> tuple[Flow[Any], ...]:
    """Load the flows of the reference stored with a run (a Registry's: several)."""
    kind, _, rest = ref.partition(":")
    if kind == "name":
        return (load_named_flow(rest),)
    if kind == "file":  # the file `dex run --file` named: imported again only if still the user's own
        from dexcli.cli.config import distrust

        path = Path(rest.rpartition(":")[0])
        why = distrust(path) if path.is_file() else None
        if why is not None:
            raise UsageError(f"the flow's code {path} is not imported: {why}")
        return load_file_flows(rest)
    raise UsageError(f"cannot load flow from reference {ref!r}")


def load_ref(ref: str) -> Flow[Any]:
    """Load the one flow of an installed flow's reference (`name:…`)."""
    flows = ref_flows(ref)
    if len(flows) != 1:
        raise UsageError(f"{ref} gives {len(flows)} flows ({_types(flows)})")
    return flows[0]
