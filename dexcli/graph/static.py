"""Read step classes' source with `ast`: where each step decides (what a decision site names,
and the constants its options use, are evaluated in dexcli.graph.evaluate).

Nothing here runs user code. Everything is cached per class / per file; code whose source is
not available yields no findings rather than errors.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

# Methods of a Step that are not part of its decision logic.
NON_DECISION_METHODS = frozenset({"get_step_options", "get_step_type", "__init__", "wait_for"})

TERMINALS = {
    "graceful_complete": "gracefulComplete",
    "force_complete": "forceComplete",
    "force_complete_if_channels_empty": "forceComplete",
    "force_fail": "forceFail",
    "dead_end": "deadEnd",
}
GO_TO = frozenset({"go_to"})
GO_TO_MANY = frozenset({"go_to_many", "go_to_multi"})


# --------------------------------------------------------------------------- source access
@lru_cache(maxsize=256)
def _parse_file(filename: str, mtime_key: int) -> ast.Module | None:
    text = "".join(linecache.getlines(filename))
    if not text:
        return None
    try:
        return ast.parse(text, filename)
    except (SyntaxError, ValueError):  # not Python, or (3.11) a null byte: no findings
        return None


def parse_file(filename: str | None) -> ast.Module | None:
    if not filename:
        return None
    linecache.checkcache(filename)
    lines = linecache.getlines(filename)
    return _parse_file(filename, hash(tuple(lines)))


def source_file(obj: Any) -> str | None:
    try:
        return inspect.getsourcefile(obj)
    except (TypeError, OSError):
        return None


def _first_line(node: ast.AST) -> int:
    decos: list[ast.expr] = getattr(node, "decorator_list", [])
    line: int = getattr(node, "lineno", 0)
    return min([line] + [d.lineno for d in decos])


def find_def(tree: ast.Module, name: str, firstline: int, kinds: tuple[type, ...]) -> ast.AST | None:
    fallback = None
    for node in ast.walk(tree):
        if isinstance(node, kinds) and getattr(node, "name", None) == name:
            if firstline in (node.lineno, _first_line(node)):  # type: ignore[attr-defined]
                return node
            fallback = fallback or node
    return fallback


@dataclass
class FuncInfo:
    """One function or method whose source we have: its node and where it lives."""

    name: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    file: str
    globals: dict[str, Any]
    owner: type | None  # the class defining it, for methods
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    local_names: frozenset[str] = frozenset()

    @property
    def is_async(self) -> bool:
        return isinstance(self.node, ast.AsyncFunctionDef)

    def param(self, index: int) -> str | None:
        args = self.node.args.posonlyargs + self.node.args.args
        return args[index].arg if len(args) > index else None


def _prepare(info: FuncInfo) -> FuncInfo:
    parents: dict[ast.AST, ast.AST] = {}
    local: set[str] = set()
    for node in ast.walk(info.node):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
    info.parents = parents
    info.local_names = frozenset(local)
    return info


def _module_globals(obj: Any) -> dict[str, Any]:
    import sys

    mod = sys.modules.get(getattr(obj, "__module__", "") or "")
    return vars(mod) if mod is not None else {}  # live: names defined later in the module count


def _is_sdk_class(klass: type) -> bool:
    mod = getattr(klass, "__module__", "") or ""
    return klass is object or mod.startswith(("dexcli.sdk", "typing", "abc", "builtins"))


@lru_cache(maxsize=512)
def class_methods(cls: type) -> dict[str, FuncInfo]:
    """Methods a step class defines or inherits from user classes, by name (MRO order)."""
    methods: dict[str, FuncInfo] = {}
    for klass in cls.__mro__:
        if _is_sdk_class(klass):
            continue
        filename, cdef = class_node(klass)
        if cdef is None or filename is None:
            continue
        glb = _module_globals(klass)
        for item in cdef.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name not in methods:
                methods[item.name] = _prepare(FuncInfo(item.name, item, filename, glb, klass))
    return methods


@lru_cache(maxsize=512)
def function_info(fn: types.FunctionType) -> FuncInfo | None:
    filename = source_file(fn)
    tree = parse_file(filename)
    if tree is None or filename is None:
        return None
    node = find_def(tree, fn.__name__, fn.__code__.co_firstlineno, (ast.FunctionDef, ast.AsyncFunctionDef))
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return _prepare(FuncInfo(fn.__name__, node, filename, fn.__globals__, None))


def _qualname_match(tree: ast.Module, parts: list[str]) -> ast.ClassDef | None:
    """The class at a qualname path (`Outer.Inner`; `f.<locals>.C` looks inside function f)."""
    scope: list[ast.stmt] = tree.body
    found: ast.AST | None = None
    for part in parts:
        if part == "<locals>":
            if not isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return None
            scope = [n for n in ast.walk(found) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
            continue
        found = next((n for n in scope if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.name == part), None)
        if found is None:
            return None
        scope = getattr(found, "body", [])
    return found if isinstance(found, ast.ClassDef) else None


@lru_cache(maxsize=1024)
def class_node(cls: type) -> tuple[str | None, ast.ClassDef | None]:
    """The file and ClassDef of a class, found by its qualname in the cached parse of its file."""
    filename = source_file(cls)
    tree = parse_file(filename)
    if tree is None:
        return filename, None
    node = _qualname_match(tree, getattr(cls, "__qualname__", cls.__name__).split("."))
    if node is None:
        candidates = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
        node = candidates[0] if len(candidates) == 1 else None
    return filename, node


def class_location(cls: type) -> tuple[str | None, int | None]:
    filename, node = class_node(cls)
    return filename, node.lineno if node is not None else None


# --------------------------------------------------------------------------- small AST helpers
def callee_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def is_movement_call(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Attribute) and f.attr == "of":
        return (dotted(f.value) or "").split(".")[-1] == "StepMovement"
    return (dotted(f) or "").split(".")[-1] == "StepMovement"


def first_arg(call: ast.Call, keyword: str) -> ast.AST | None:
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return None


def walk_own(node: ast.AST) -> list[ast.AST]:
    """ast.walk that does not enter nested function or class definitions (but does enter lambdas)."""
    out: list[ast.AST] = []
    stack = [node]
    while stack:
        cur = stack.pop()
        out.append(cur)
        for child in ast.iter_child_nodes(cur):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            stack.append(child)
    out.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return out


def unparse(node: ast.AST, limit: int = 60) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - very old / odd nodes
        return "<expr>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- decision sites
@dataclass(frozen=True)
class Site:
    """One place in a step's source that decides: a terminal, a goTo target, or an unknown."""

    kind: str  # goTo | gracefulComplete | forceComplete | forceFail | deadEnd | unknown
    target: ast.AST | None  # goTo: the target expression
    text: str  # source text, for messages
    file: str
    line: int
    func: FuncInfo = field(compare=False, hash=False, repr=False)


@dataclass
class StepSource:
    available: bool
    sites: list[Site]
    functions: list[FuncInfo]  # decision functions read: methods, then followed module helpers


def _is_decision_call(call: ast.Call) -> bool:
    name = callee_name(call.func)
    return name in TERMINALS or name in GO_TO or name in GO_TO_MANY or is_movement_call(call)


def _contains_decision(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _is_decision_call(n) for n in ast.walk(node))


def _followed_helper(call: ast.Call, fi: FuncInfo, methods: dict[str, FuncInfo]) -> FuncInfo | None:
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == fi.param(0):
        return methods.get(f.attr) if fi.owner is not None else None
    if isinstance(f, ast.Name) and f.id not in fi.local_names:
        obj = fi.globals.get(f.id)
        if isinstance(obj, types.FunctionType) and not (obj.__module__ or "").startswith("dexcli"):
            return function_info(obj)
    return None


def _returned_value(ret: ast.Return) -> ast.AST | None:
    if ret.value is None:
        return None
    return ret.value.value if isinstance(ret.value, ast.Await) else ret.value


def _decision_returners(functions: list[FuncInfo], methods: dict[str, FuncInfo]) -> list[FuncInfo]:
    """The functions whose return value is the step's decision: `execute`, and the helpers whose
    result it returns (`return self._decide(x)`, `return choose(x)`), transitively. A helper that
    returns data (`state = provider_state(...)`) is not one: its returns decide nothing."""
    execute = methods.get("execute")
    if execute is None:
        return []
    read = {id(fi.node) for fi in functions}
    found: list[FuncInfo] = []
    done: set[int] = set()
    todo = [execute]
    while todo:
        fi = todo.pop(0)
        if id(fi.node) in done or id(fi.node) not in read:
            continue
        done.add(id(fi.node))
        found.append(fi)
        for n in walk_own(fi.node):
            value = _returned_value(n) if isinstance(n, ast.Return) else None
            if isinstance(value, ast.Call):
                helper = _followed_helper(value, fi, methods)
                if helper is not None:
                    todo.append(helper)
    return found


def _unknown_returns(fi: FuncInfo, methods: dict[str, FuncInfo], deciding: bool) -> list[Site]:
    """A decision function's returns whose decision cannot be read from source."""
    out: list[Site] = []
    for n in walk_own(fi.node):
        if not isinstance(n, ast.Return):
            continue
        value = _returned_value(n)
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            continue
        if _contains_decision(value):
            continue
        if isinstance(value, ast.Call) and _followed_helper(value, fi, methods) is not None:
            continue
        if isinstance(value, ast.Name) and deciding:
            continue  # a name bound to a decision made above
        out.append(Site("unknown", None, unparse(value), fi.file, n.lineno, fi))
    return out


@lru_cache(maxsize=512)
def step_source(cls: type) -> StepSource:
    """Every decision site of a step class (cached per class)."""
    methods = class_methods(cls)
    if "execute" not in methods:
        return StepSource(False, [], [])
    todo = [m for name, m in methods.items() if name not in NON_DECISION_METHODS]
    seen: set[int] = set()
    functions: list[FuncInfo] = []
    sites: list[Site] = []
    deciding: set[int] = set()  # functions that call go_to or a terminal
    while todo:
        fi = todo.pop(0)
        if id(fi.node) in seen:
            continue
        seen.add(id(fi.node))
        functions.append(fi)
        nodes = walk_own(fi.node)
        movement_calls = [n for n in nodes if isinstance(n, ast.Call) and is_movement_call(n)]
        has_decision = False
        for n in nodes:
            if not isinstance(n, ast.Call):
                continue
            helper = _followed_helper(n, fi, methods)
            if helper is not None and helper.owner is None:
                todo.append(helper)
            name = callee_name(n.func)
            line = n.lineno
            if is_movement_call(n) or name in GO_TO:
                has_decision = True
                key = "step"
                target = first_arg(n, key)
                sites.append(Site("goTo", target, unparse(n), fi.file, line, fi))
            elif name in GO_TO_MANY:
                has_decision = True
                direct = [a for a in n.args if isinstance(a, ast.Call) and is_movement_call(a)]
                others = [a for a in n.args if a not in direct]
                indirect = [m for m in movement_calls if m not in direct]
                if others and not indirect:
                    for a in others:
                        sites.append(Site("unknown", None, unparse(a), fi.file, line, fi))
            elif name in TERMINALS:
                has_decision = True
                sites.append(Site(TERMINALS[name], None, unparse(n), fi.file, line, fi))
        if has_decision:
            deciding.add(id(fi.node))
    for fi in _decision_returners(functions, methods):
        sites.extend(_unknown_returns(fi, methods, id(fi.node) in deciding))
    sites.sort(key=lambda s: (s.func.name != "execute", s.file, s.line))
    return StepSource(True, sites, functions)
