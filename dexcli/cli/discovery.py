"""Find the installed flow plugins (dexcli.plugins): the entry-point group `dex.flows`.

Each installed distribution lists its entry points in `<name>.dist-info/entry_points.txt` (or
`.egg-info/`), an INI file (the PyPA entry-points specification). This module reads those
files itself instead of going through importlib.metadata, which gives the same answer but
costs 15-25 ms to import (it pulls in email, zipfile and csv), and `dex --help` lists the
plugins' commands within its start-up budget. As importlib.metadata does, a distribution
found twice on sys.path counts once, the first time.

Discovery runs only for the commands that need it (`dex --help`, `dex run`, `dex flows`, a
plugin's command, loading a flow by name), once per process. A plugin that cannot be loaded
is skipped with a warning, so one broken package does not break `dex`.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dexcli.plugins import FlowPlugin

GROUP = "dex.flows"


@dataclass(frozen=True)
class EntryPoint:
    name: str
    value: str  # "module:attr"
    dist: str


@dataclass
class Installed:
    """The plugins found, by name (in name order), and why any were skipped."""

    plugins: dict[str, FlowPlugin] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # plugin name -> entry point value
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> FlowPlugin | None:
        return self.plugins.get(name)

    def for_ref(self, flow_ref: str | None) -> FlowPlugin | None:
        """The plugin of a flow started by name (`name:polling`), if it is installed."""
        kind, _, name = (flow_ref or "").partition(":")
        return self.plugins.get(name) if kind == "name" else None


def _dist_name(dirname: str) -> str:
    stem = dirname.rsplit(".", 1)[0]  # drop .dist-info / .egg-info
    return re.sub(r"[-_.]+", "_", stem.split("-", 1)[0]).lower()


def _metadata_dirs() -> Iterator[tuple[str, Path]]:
    seen: set[str] = set()
    for entry in sys.path:
        base = Path(entry or ".")
        try:
            names = sorted(os.listdir(base))
        except OSError:  # missing, or a zip file
            continue
        for n in names:
            if n.endswith((".dist-info", ".egg-info")):
                dist = _dist_name(n)
                if dist not in seen:
                    seen.add(dist)
                    yield dist, base / n


def parse_entry_points(text: str, group: str, dist: str) -> list[EntryPoint]:
    """The entries of one `[group]` section of an entry_points.txt."""
    found, section = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            found.append(EntryPoint(name.strip(), value.strip(), dist))
    return found


def entry_points(group: str = GROUP) -> list[EntryPoint]:
    found = []
    for dist, path in _metadata_dirs():
        try:
            text = (path / "entry_points.txt").read_text(encoding="utf-8")
        except OSError:
            continue
        found.extend(parse_entry_points(text, group, dist))
    return found


def load_entry_point(ep: EntryPoint) -> object:
    module_name, _, attr = ep.value.split("[", 1)[0].partition(":")  # "module:attr [extras]"
    obj: object = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        obj = getattr(obj, part)
    return obj


def discover(eps: list[EntryPoint]) -> Installed:
    found = Installed()
    for ep in eps:
        where = f"{ep.value} (entry point {ep.name!r} of {ep.dist})"
        try:
            plugin = load_entry_point(ep)
        except Exception as exc:  # a broken plugin must not break dex
            found.warnings.append(f"flow plugin {where} cannot be loaded: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(plugin, FlowPlugin):
            found.warnings.append(f"flow plugin {where} is not a dexcli.plugins.FlowPlugin")
            continue
        if plugin.name in found.plugins:
            if found.origin[plugin.name] != ep.value:
                found.warnings.append(f"flow plugin {where} is ignored: the name {plugin.name!r} is taken "
                                      f"by {found.origin[plugin.name]}")
            continue
        found.plugins[plugin.name] = plugin
        found.origin[plugin.name] = ep.value
    found.plugins = dict(sorted(found.plugins.items()))
    return found


@functools.cache
def installed() -> Installed:
    """Every flow plugin installed, found once per process (`installed.cache_clear()` forgets)."""
    return discover(entry_points())
