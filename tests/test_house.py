"""The house rules that keep dexcli readable: modules under 500 lines, functions under 60."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dexcli"
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def oversized(source: str) -> list[str]:
    """What breaks the size rules in one module's source."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"the module has {lines} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
            length = node.end_lineno - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{node.name} (line {node.lineno}) has {length} lines")
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_module_and_function_sizes(path: Path) -> None:
    assert oversized(path.read_text()) == []


def test_the_rule_counts_a_function_from_def_to_its_last_line() -> None:
    def source(n: int) -> str:  # a function of exactly n lines, nested in a class
        body = "\n".join(f"        x{i} = {i}" for i in range(n - 1))
        return f"class C:\n    def f(self):\n{body}\n"

    assert oversized(source(MAX_FUNCTION_LINES)) == []
    assert oversized(source(MAX_FUNCTION_LINES + 1)) == [f"f (line 2) has {MAX_FUNCTION_LINES + 1} lines"]
    assert oversized("x = 1\n" * (MAX_MODULE_LINES + 1)) == [f"the module has {MAX_MODULE_LINES + 1} lines"]
