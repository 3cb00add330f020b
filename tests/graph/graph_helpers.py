"""Shared helpers for tests/graph (plain module; the folder has no __init__.py)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dexcli.cli.loader import load_flow

BAD = Path(__file__).resolve().parent / "bad_flows"
MARK = re.compile(r"#\s*(FINDING|ERROR|WARNING)\s+([a-z-]+)")


def flow_class(path: Path) -> str:
    return re.findall(r"^class (\w+)\(Flow", path.read_text(), re.M)[-1]


def file_ref(name: str) -> str:
    path = BAD / f"{name}.py"
    return f"{path}:{flow_class(path)}"


def load_bad(name: str) -> Any:
    flow, _ = load_flow(file=file_ref(name))
    return flow


def expected_markers(name: str) -> set[tuple[str, str, int]]:
    """(severity, rule, line) for each `# FINDING|ERROR|WARNING rule` marker in a bad flow."""
    out = set()
    for i, line in enumerate((BAD / f"{name}.py").read_text().splitlines(), 1):
        m = MARK.search(line)
        if m:
            out.add(("error" if m.group(1) == "ERROR" else "warning", m.group(2), i))
    return out
