"""Evaluate what step code refers to without running it: a goTo target's step, and plain
constants (numbers, timedeltas, names bound to them) read from source with `ast`.

Only names the step's module and builtins bind, and attributes of the step instances the flow
already built (for `self.<attr>`), are looked up; anything else is Unknown / MISSING.
"""

from __future__ import annotations

import ast
import builtins
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from dexcli.graph.static import FuncInfo, Site, callee_name, unparse

# --------------------------------------------------------------------------- resolution
MISSING = object()


@dataclass(frozen=True)
class Resolved:
    """What a goTo target expression denotes."""

    status: str  # step | missing | notstep | runtime
    step_type: str | None = None
    detail: str = ""


def _lookup_name(name: str, fi: FuncInfo) -> Any:
    if name in fi.globals:
        return fi.globals[name]
    return getattr(builtins, name, MISSING)


def eval_ref(expr: ast.AST, fi: FuncInfo, instance: Any) -> Any:
    """Evaluate a simple reference (Name, dotted attribute, self.attr, type(self)) or MISSING."""
    self_name = fi.param(0) if fi.owner is not None else None
    if isinstance(expr, ast.Constant):
        return expr.value
    if isinstance(expr, ast.Name):
        if expr.id == self_name:
            return instance
        if expr.id in fi.local_names:
            return MISSING
        return _lookup_name(expr.id, fi)
    if isinstance(expr, ast.Attribute):
        if expr.attr == "__class__" and isinstance(expr.value, ast.Name) and expr.value.id == self_name:
            return type(instance)
        base = eval_ref(expr.value, fi, instance)
        if base is MISSING:
            return MISSING
        try:
            return getattr(base, expr.attr)
        except Exception:
            return MISSING
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "type" \
            and len(expr.args) == 1 and isinstance(expr.args[0], ast.Name) and expr.args[0].id == self_name:
        return type(instance)
    return MISSING


def resolve_target(site: Site, instance: Any, steps: list[tuple[str, Any]]) -> Resolved:
    """Resolve a goTo site against the flow's registered (step_type, instance) pairs."""
    from dexcli.sdk.flow import Step

    expr = site.target
    if expr is None:
        return Resolved("runtime", detail="no target given")
    text = unparse(expr)
    fi = site.func
    if isinstance(expr, ast.Name) and expr.id not in fi.local_names and expr.id not in fi.globals \
            and not hasattr(builtins, expr.id):
        for st, inst in steps:
            if type(inst).__name__ == expr.id:
                return Resolved("step", st)
        return Resolved("missing", detail=f"{expr.id} is not defined")
    obj = eval_ref(expr, fi, instance)
    if obj is MISSING:
        return Resolved("runtime", detail=f"{text} is computed at run time")
    if isinstance(obj, str):
        for st, _ in steps:
            if st == obj:
                return Resolved("step", st)
        return Resolved("missing", detail=f"no step has step type {obj!r}")
    if isinstance(obj, Step):
        for st, inst in steps:
            if inst is obj:
                return Resolved("step", st)
        for st, inst in steps:
            if type(inst) is type(obj):
                return Resolved("step", st)
        return Resolved("missing", detail=f"{text} is a {type(obj).__name__}, which is not registered")
    if isinstance(obj, type) and issubclass(obj, Step):
        for st, inst in steps:
            if type(inst) is obj:
                return Resolved("step", st)
        return Resolved("missing", detail=f"{obj.__name__} is not registered")
    return Resolved("notstep", detail=f"{text} is a {type(obj).__name__}, not a step")


# --------------------------------------------------------------------------- constants
class Unknown(Exception):
    """An expression is not a constant we can evaluate without running code."""


_SAFE_CALLS = {"timedelta", "float", "int", "min", "max"}
_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}


def const_value(expr: ast.AST, fi: FuncInfo, instance: Any) -> Any:
    """Evaluate numbers, timedeltas and constant names/attributes; raise Unknown otherwise."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (int, float)) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, (ast.Name, ast.Attribute)):
        obj = eval_ref(expr, fi, instance)
        if isinstance(obj, (int, float, timedelta)) and not isinstance(obj, bool):
            return obj
        raise Unknown(unparse(expr))
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return -const_value(expr.operand, fi, instance)
    if isinstance(expr, ast.BinOp):
        left, right = const_value(expr.left, fi, instance), const_value(expr.right, fi, instance)
        op = _BINOPS.get(type(expr.op))
        if op is None:
            raise Unknown(unparse(expr))
        try:
            return op(left, right)
        except Exception as exc:
            raise Unknown(unparse(expr)) from exc
    if isinstance(expr, ast.Call):
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr == "total_seconds" and not expr.args:
            value = const_value(f.value, fi, instance)
            if isinstance(value, timedelta):
                return value.total_seconds()
            raise Unknown(unparse(expr))
        name = callee_name(f)
        if name in _SAFE_CALLS:
            fn = eval_ref(f, fi, instance)
            if fn in (timedelta, float, int, min, max):
                args = [const_value(a, fi, instance) for a in expr.args]
                kwargs = {k.arg: const_value(k.value, fi, instance) for k in expr.keywords if k.arg}
                try:
                    return fn(*args, **kwargs)
                except Exception as exc:
                    raise Unknown(unparse(expr)) from exc
    raise Unknown(unparse(expr))


def const_seconds(expr: ast.AST, fi: FuncInfo, instance: Any) -> float:
    value = const_value(expr, fi, instance)
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)
