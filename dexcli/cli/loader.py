"""Find a flow by name (`polling`: an installed flow plugin) or by file (`path/to/module.py:FlowClass`).

The reference a flow was loaded from is stored with each run (`name:polling`,
`file:/abs/path.py:Class`), so `dex resume` and `dex worker` in another process can load the
same code: `load_ref` is the loader the CLI gives its engine.
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


def _instantiate(obj: Any, where: str) -> Flow[Any]:
    if isinstance(obj, Flow):
        return obj
    if isinstance(obj, type) and issubclass(obj, Flow):
        try:
            inspect.signature(obj).bind()
        except TypeError as exc:  # its __init__ needs arguments: `dex` has none to give
            raise UsageError(f"{where}: cannot create the flow with no arguments ({exc})") from None
        except ValueError:  # no signature to check: try it
            pass
        try:
            return obj()
        except Exception as exc:
            raise UsageError(f"{where}: creating the flow failed: {raised(exc)}") from None
    raise UsageError(f"{where} is not a dex Flow class or instance")


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


def load_file_flow(spec: str) -> Flow[Any]:
    """`path/to/module.py:FlowClass` (or a module-level Flow instance)."""
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
    return _instantiate(getattr(module, attr), f"{path_s}:{attr}")


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
    """Return the flow and the reference to store with its runs (`name:…` or `file:path:Class`)."""
    if file:
        if name:
            raise UsageError("give a flow name or --file, not both")
        path_s, _, attr = file.rpartition(":")
        return load_file_flow(file), f"file:{Path(path_s).expanduser().resolve()}:{attr}"
    if not name:
        raise UsageError("name a flow (see `dex flows`) or pass --file path.py:Class")
    return load_named_flow(name), f"name:{name}"


def load_ref(ref: str) -> Flow[Any]:
    """Load a flow from the reference stored with its run."""
    kind, _, rest = ref.partition(":")
    if kind == "name":
        return load_named_flow(rest)
    if kind == "file":  # the file `dex run --file` named: imported again only if still the user's own
        from dexcli.cli.config import distrust

        path = Path(rest.rpartition(":")[0])
        why = distrust(path) if path.is_file() else None
        if why is not None:
            raise UsageError(f"the flow's code {path} is not imported: {why}")
        return load_file_flow(rest)
    raise UsageError(f"cannot load flow from reference {ref!r}")
