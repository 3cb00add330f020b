"""Find a flow by name (`polling`) or by file (`path/to/module.py:FlowClass`).

The reference a flow was loaded from is stored with each run, so `dex resume` and
`dex worker` in another process can load the same code.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dexcli.sdk.errors import NotFoundError, UsageError
from dexcli.sdk.flow import Flow


@dataclass(frozen=True)
class KnownFlow:
    name: str
    target: str  # "module:attr"
    description: str


KNOWN_FLOWS: dict[str, KnownFlow] = {
    "polling": KnownFlow(
        "polling", "flows.polling:PollingFlow",
        "Wait for a simulated external job: progress on each status change, result at the end.",
    ),
    "three-steps": KnownFlow(
        "three-steps", "flows.three_steps:ThreeStepFlow",
        "Three short steps in a row, each checkpointed: the smallest flow to crash and resume.",
    ),
}


def _instantiate(obj: Any, where: str) -> Flow[Any]:
    if isinstance(obj, Flow):
        return obj
    if isinstance(obj, type) and issubclass(obj, Flow):
        try:
            return obj()
        except TypeError as exc:
            raise UsageError(f"{where}: cannot create the flow with no arguments ({exc})") from exc
    raise UsageError(f"{where} is not a dex Flow class or instance")


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
        sys.path.insert(0, str(path.parent))
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


def load_named_flow(name: str) -> Flow[Any]:
    known = KNOWN_FLOWS.get(name)
    if known is None:
        names = ", ".join(sorted(KNOWN_FLOWS))
        raise NotFoundError(f"unknown flow {name!r}; known flows: {names} (or use --file path.py:Class)")
    module_name, _, attr = known.target.partition(":")
    module = importlib.import_module(module_name)
    return _instantiate(getattr(module, attr), known.target)


def load_flow(name: str | None = None, file: str | None = None) -> tuple[Flow[Any], str]:
    """Return the flow and the reference to store with its runs (`name` or `file:path:Class`)."""
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
    if kind == "file":
        return load_file_flow(rest)
    raise UsageError(f"cannot load flow from reference {ref!r}")
