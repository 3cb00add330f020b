"""The one-way import rule, checked statically over every module of dexcli/, flows/ and bench/.

    sdk      imports nothing else of dexcli (flow authors import it; it must stay small)
    store    imports nothing else of dexcli (the only package that speaks SQL)
    engine   imports neither cli, client, testing nor graph (they are built on it)
    flows/   does not import dexcli.engine (a flow package uses the SDK, dexcli.host, dexcli.plugins)
    typer and rich are imported by dexcli/cli only
    cli      reads no private name of another package (`obj._name`, `from x import _name`)

and the cohesion checks that replaced the old line caps (modules are cut at seams, not at line
counts):

    no two modules (or subpackages) of one package import each other, type-only imports included
    no module keeps an `Engine` but the engine's own and the callers of its face
    `Engine` has at most 15 public names, and outside dexcli/engine only those are used

Every import counts, wherever it is: at module level, inside a function, and under
`if TYPE_CHECKING:`. A type-only import still makes the importing layer depend on the imported
one (its annotations name it; a type checker follows it), so it is as wrong a direction as a
run-time import, and a two-way import between modules of one package as wrong a seam. Type-only
imports are exempt from one check only: run-time import cycles.

`import dexcli` and `import dexcli.engine.core` are also run in a fresh interpreter, which must
then have loaded neither typer nor rich.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("dexcli", "flows", "bench")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, e.g. dexcli.engine.core
    path: Path
    line: int
    target: str  # the imported module, absolute, e.g. dexcli.store or typer.core
    type_only: bool  # under `if TYPE_CHECKING:`
    deferred: bool  # inside a function

    def __str__(self) -> str:
        where = " (type-only)" if self.type_only else " (in a function)" if self.deferred else ""
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.source} imports {self.target}{where}"


INSTALLED_AS = {"flows": "dexcli_flows"}  # folder -> the package name it installs as (pyproject.toml)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    parts[0] = INSTALLED_AS.get(parts[0], parts[0])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    folders = {v: k for k, v in INSTALLED_AS.items()}
    top, *rest = name.split(".")
    base = ROOT.joinpath(folders.get(top, top), *rest)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import statement loads: `from a import b` is a.b when that is a module."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    subs = [f"{module}.{a.name}" for a in node.names if is_module(f"{module}.{a.name}")]
    return subs if subs and len(subs) == len(node.names) else [module, *subs]


def _walk(node: ast.AST, type_only: bool, deferred: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    for child in ast.iter_child_nodes(node):
        child_type_only = type_only or (isinstance(node, ast.If) and _is_type_checking(node.test)
                                        and child in node.body)
        child_deferred = deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, child_type_only, child_deferred
        yield from _walk(child, child_type_only, child_deferred)


@cache
def sources() -> tuple[Path, ...]:
    return tuple(sorted(p for top in SCANNED for p in (ROOT / top).rglob("*.py")
                        if "__pycache__" not in p.parts))


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imports_in(module: ast.Module, source: str, package: str, path: Path) -> list[Import]:
    return [Import(source, path, node.lineno, target, type_only, deferred)
            for node, type_only, deferred in _walk(module, False, False) for target in _targets(node, package)]


@cache
def imports() -> tuple[Import, ...]:
    out = []
    for path in sources():
        source = module_name(path)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        out += imports_in(tree(path), source, package, path)
    return tuple(out)


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


# ---------------------------------------------------------------------------- direction ----
@dataclass(frozen=True)
class Rule:
    what: str
    importer: Callable[[str], bool]
    forbidden: Callable[[str], bool]


RULES = [
    Rule("dexcli/sdk imports nothing else of dexcli",
         lambda s: under(s, "dexcli.sdk"), lambda t: under(t, "dexcli") and not under(t, "dexcli.sdk")),
    Rule("dexcli/store imports nothing else of dexcli",
         lambda s: under(s, "dexcli.store"), lambda t: under(t, "dexcli") and not under(t, "dexcli.store")),
    Rule("dexcli/engine imports neither cli, client, worker, testing nor graph",
         lambda s: under(s, "dexcli.engine"),
         lambda t: under(t, "dexcli.cli", "dexcli.client", "dexcli.worker", "dexcli.testing", "dexcli.graph")),
    Rule("flows/ does not import dexcli.engine",
         lambda s: under(s, "dexcli_flows"), lambda t: under(t, "dexcli.engine")),
    Rule("only dexcli/cli imports typer or rich",
         lambda s: not under(s, "dexcli.cli"), lambda t: under(t, "typer", "rich")),
]


def test_the_scan_sees_the_packages() -> None:
    """Guards the checks below against passing because they read nothing."""
    names = {module_name(p) for p in sources()}
    assert {"dexcli.sdk.registry", "dexcli.store.tx", "dexcli.engine.core", "dexcli_flows.polling"} <= names
    found = {i.target for i in imports() if i.source == "dexcli.engine.transitions.outcomes"}
    assert {"dexcli.store", "dexcli.engine.definitions"} <= found


def test_the_scan_sees_every_kind_of_import() -> None:
    module = ast.parse(
        "from __future__ import annotations\nimport typing\nif typing.TYPE_CHECKING:\n"
        "    from dexcli.engine import core\nfrom . import flow\nfrom .errors import DexError\n"
        "def f():\n    import rich.console\n    from ..store import Store\n")
    found = [(i.target, i.type_only, i.deferred)
             for i in imports_in(module, "dexcli.sdk.x", "dexcli.sdk", ROOT / "dexcli/sdk/x.py")]
    assert found == [("__future__", False, False), ("typing", False, False), ("dexcli.engine.core", True, False),
                     ("dexcli.sdk.flow", False, False), ("dexcli.sdk.errors", False, False),
                     ("rich.console", False, True), ("dexcli.store", False, True)]
    rule = RULES[0]
    assert [t for t, _, _ in found if rule.forbidden(t)] == ["dexcli.engine.core", "dexcli.store"]


@pytest.mark.parametrize("rule", RULES, ids=[r.what for r in RULES])
def test_imports_go_one_way(rule: Rule) -> None:
    wrong = [str(i) for i in imports() if rule.importer(i.source) and rule.forbidden(i.target)]
    assert wrong == [], f"{rule.what}:\n  " + "\n  ".join(wrong)


def test_no_import_cycle_at_run_time() -> None:
    """Module-level imports that run when a module is imported form no cycle (imports inside
    functions run later, type-only ones never)."""
    graph: dict[str, set[str]] = {}
    for i in imports():
        if not i.type_only and not i.deferred and is_module(i.target) and i.target != i.source:
            if under(i.source, i.target):  # importing one's own package runs its __init__ first
                continue
            graph.setdefault(i.source, set()).add(i.target)
    cycles = _cycles(graph)
    assert cycles == [], "import cycles:\n  " + "\n  ".join(" -> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "x": {"b"}}) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = path[path.index(node):] + [node]
            if sorted(cycle[:-1]) not in [sorted(c[:-1]) for c in found]:
                found.append(cycle)
            return
        if node in done:
            return
        for nxt in sorted(graph.get(node, ())):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    return found


# ---------------------------------------------------------------------------- private names -
def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _bound_to_other_code(module: ast.Module) -> set[str]:
    """Names a cli module binds by importing a module that is not dexcli's, or is dexcli/cli's
    own: their private names are no reach-in into the engine or the store."""
    names = set()
    for node, _, _ in _walk(module, False, False):
        for alias in node.names:
            if isinstance(node, ast.Import):
                target, bound = alias.name, (alias.asname or alias.name).split(".")[0]
            elif node.level:  # relative: a module of dexcli/cli itself
                names.add(alias.asname or alias.name)
                continue
            else:
                target, bound = f"{node.module}.{alias.name}", alias.asname or alias.name
            if not under(target, "dexcli") or under(target, "dexcli.cli"):
                names.add(bound)
    return names


def private_reads_in(module: ast.Module) -> list[tuple[int, str]]:
    """(line, code) of each read of another package's private name in one cli module: an
    attribute `x._name` (not a dunder; `x` not self, cls, nor a module that is not dexcli's or is
    dexcli/cli's own) and `from dexcli.<not cli> import _name`. Assignments are not reads: the
    CLI marks its own click objects that way."""
    own = _bound_to_other_code(module)
    out = []
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _private(node.attr):
            base = node.value
            if not (isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in own)):
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and not node.level and under(node.module or "", "dexcli") \
                and not under(node.module or "", "dexcli.cli"):
            out += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if _private(a.name)]
    return sorted(out)


def test_the_private_name_check_sees_a_reach_in() -> None:
    module = ast.parse(
        "import os\nfrom dexcli.cli import render\nfrom dexcli.engine.core import Engine\n"
        "from dexcli.store.tx import _in\n"
        "def f(engine, self):\n"
        "    os._exit(0); render._style(); self._x; engine.__class__; engine._poke()\n"
        "    command._marked = True\n"
        "    return Engine._unloadable\n")
    assert private_reads_in(module) == [(4, "from dexcli.store.tx import _in"), (6, "engine._poke"),
                                        (8, "Engine._unloadable")]


def test_the_cli_reads_no_private_name_of_another_package() -> None:
    reads = [f"{path.relative_to(ROOT)}:{line}: {code}" for path in sources()
             if under(module_name(path), "dexcli.cli") for line, code in private_reads_in(tree(path))]
    assert reads == [], "dexcli/cli reaches into private names:\n  " + "\n  ".join(reads)


# ---------------------------------------------------------------------------- at run time --
@pytest.mark.parametrize("module", ["dexcli", "dexcli.engine.core", "dexcli.store", "dexcli.sdk"])
def test_importing_the_library_loads_neither_typer_nor_rich(module: str) -> None:
    code = (f"import sys, json, {module}\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'rich', 'dexcli'))))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert [m for m in loaded if under(m, "typer", "rich")] == [], loaded
    if module in ("dexcli.store", "dexcli.sdk"):  # and nothing else of dexcli, at run time either
        assert [m for m in loaded if m != "dexcli" and not under(m, module)] == [], loaded


# ---------------------------------------------------------------------------- cohesion -----

# The face: what the CLI, Client/AsyncClient, Worker and DexTestEnv use of an Engine.
FACE = {
    "store", "clock", "definitions", "events",
    "check_runnable", "start_flow", "start_flow_async", "drive", "drive_async", "change",
    "invoke_rpc", "invoke_rpc_async", "release", "activity", "use_attribute_stores",
}
# The face's callers own the engine they built (dexcli.builder) or were given; no other module
# (the engine's own helpers, the CLI's) keeps one: helpers get their collaborators and callbacks.
ENGINE_OWNERS = {"dexcli.client", "dexcli.client_waits", "dexcli.worker", "dexcli.testing"}


def two_way_imports(found: tuple[Import, ...] | None = None) -> set[tuple[str, str, str]]:
    """(package, a, b) for each pair of rooms (modules or subpackages) of one package that import
    each other, wherever the imports stand (type-only included)."""
    uses: set[tuple[str, str, str]] = set()  # (package, room, room it imports)
    for i in imports() if found is None else found:
        if i.source == i.target:
            continue
        parts, target = i.source.split("."), i.target.split(".")
        for depth in range(1, len(parts)):  # each package the importer is inside
            package = parts[:depth]
            if target[:depth] == package and len(target) > depth and target[depth] != parts[depth]:
                uses.add((".".join(package), parts[depth], target[depth]))
    return {(p, a, b) for p, a, b in uses if a < b and (p, b, a) in uses}


def keeps_an_engine(module: ast.Module) -> bool:
    """Whether a module keeps an Engine on an object: `self.x = engine` / `= Engine(...)` /
    `= build_engine(...)`, or an attribute or class field annotated `Engine`."""
    def is_engine_type(node: ast.expr | None) -> bool:
        text = ast.unparse(node).strip("'\"") if node is not None else ""
        return text in ("Engine", "Engine | None") or text.endswith(".Engine")

    for node in ast.walk(module):
        if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.AnnAssign) and is_engine_type(b.annotation) for b in node.body):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute) and is_engine_type(
                node.annotation):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Attribute) for t in targets) and value is not None and (
                (isinstance(value, ast.Name) and value.id == "engine")
                or (isinstance(value, ast.Call)
                    and ast.unparse(value.func).split(".")[-1] in ("Engine", "build_engine"))):
            return True
    return False


def engine_keepers() -> set[str]:
    return {module_name(path) for path in sources()
            if under(module_name(path), "dexcli") and keeps_an_engine(tree(path))}


def engine_public_names(module: ast.Module) -> set[str]:
    """The public names of class Engine: its methods and properties, and what it sets on self."""
    engine = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "Engine")
    names = set()
    for node in engine.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
            for sub in ast.walk(node):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] \
                    if isinstance(sub, ast.AnnAssign) else []
                names |= {t.attr for t in targets if isinstance(t, ast.Attribute)
                          and isinstance(t.value, ast.Name) and t.value.id == "self"}
    return {n for n in names if not n.startswith("_")}


def names_used_of_engines(module: ast.Module) -> set[tuple[int, str]]:
    """(line, name) of each `engine.NAME` / `x.engine.NAME` read (outside the engine)."""
    return {(node.lineno, node.attr) for node in ast.walk(module) if isinstance(node, ast.Attribute)
            and ((isinstance(node.value, ast.Name) and node.value.id == "engine")
                 or (isinstance(node.value, ast.Attribute) and node.value.attr == "engine"))}


def test_no_two_way_import_inside_a_package() -> None:
    assert two_way_imports() == set()


def test_no_module_but_the_engine_and_its_callers_keeps_an_engine() -> None:
    assert engine_keepers() - ENGINE_OWNERS == set()
    assert ENGINE_OWNERS - engine_keepers() == set()  # each entry still true


def test_the_engine_has_at_most_15_public_names_and_the_face_is_what_callers_use() -> None:
    names = engine_public_names(tree(ROOT / "dexcli/engine/core.py"))
    assert len(FACE) <= 15
    assert names == FACE
    used = [f"{path.relative_to(ROOT)}:{line}: engine.{name}" for path in sources()
            if under(module_name(path), "dexcli") and not under(module_name(path), "dexcli.engine")
            for line, name in sorted(names_used_of_engines(tree(path))) if name not in FACE]
    assert used == [], "callers reach past the engine's face:\n  " + "\n  ".join(used)


def test_an_engine_is_built_in_one_place() -> None:
    """dexcli/builder.py is the one builder: nothing else of dexcli, flows/ or bench/ calls Engine(...)."""
    built = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sources() if module_name(path) != "dexcli.builder"
             for node in ast.walk(tree(path)) if isinstance(node, ast.Call)
             and ast.unparse(node.func).split(".")[-1] == "Engine"]
    assert built == [], "Engine(...) outside dexcli/builder.py:\n  " + "\n  ".join(built)


def test_the_cohesion_checks_see_a_two_way_import_a_kept_engine_and_a_reach_past_the_face() -> None:
    a = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dexcli.p.b import B\n")
    b = ast.parse("import dexcli.p.a\nfrom dexcli.p.sub.x import y\n")
    sub = ast.parse("import dexcli.p.b\n")
    found = (*imports_in(a, "dexcli.p.a", "dexcli.p", ROOT / "dexcli/p/a.py"),
             *imports_in(b, "dexcli.p.b", "dexcli.p", ROOT / "dexcli/p/b.py"),
             *imports_in(sub, "dexcli.p.sub.x", "dexcli.p.sub", ROOT / "dexcli/p/sub/x.py"))
    assert two_way_imports(found) == {("dexcli.p", "a", "b"), ("dexcli.p", "b", "sub")}
    kept = ast.parse("class H:\n    def __init__(self, engine):\n        self.engine = engine\n")
    field = ast.parse("class F:\n    engine: 'Engine'\n")
    built = ast.parse("def f(self, store):\n    self._e = build_engine(store)\n")
    fine = ast.parse("def f(engine):\n    engine.drive(None)\n    x = engine\n")
    assert [keeps_an_engine(m) for m in (kept, field, built, fine)] == [True, True, True, False]
    assert names_used_of_engines(ast.parse("x.engine.scheduler.wake()\nengine.drive(None)\n")) == {
        (1, "scheduler"), (2, "drive")}
