"""The house rules that keep dexcli readable, checked over the source: cohesion, not size.

Modules are cut at seams, not at line counts (the old 500-line and 60-line caps are gone: they
cut one runtime object into satellites). What is checked instead:

  - no two modules (or subpackages) of one package import each other, `if TYPE_CHECKING:`
    imports included: a two-way import is a seam in the wrong place;
  - no helper module of dexcli/engine keeps an `Engine` (`self.engine = ...`): helpers get
    their collaborators and callbacks.

Both lists of exceptions below are today's debt, named by the engine-core issue; each entry
must still be true (the test fails when one is paid off, so the list only shrinks) and no new
one may appear.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dexcli"

TWO_WAY_DEBT = {
    ("dexcli", "cli", "plugins"),
    ("dexcli.cli", "app", "plugin_cmds"),
}
KEEPS_ENGINE_DEBT = {"runner"}


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports (absolute names), wherever the import stands."""
    found: set[str] = set()
    package = _name(path) if path.name == "__init__.py" else _name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                base = ".".join(up + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return found


def two_way_imports(root: Path = PACKAGE) -> set[tuple[str, str, str]]:
    """(package, a, b) for each pair of rooms of one package that import each other."""
    pairs = set()
    for package in sorted({p.parent for p in root.rglob("__init__.py")}):
        rooms: dict[str, set[str]] = {}
        for p in package.iterdir():
            if p.suffix == ".py" and p.name != "__init__.py":
                rooms[p.stem] = _imports(p)
            elif p.is_dir() and (p / "__init__.py").exists():
                rooms[p.name] = set().union(*(_imports(q) for q in p.rglob("*.py")))
        name = _name(package / "__init__.py")

        def uses(a: str, b: str, rooms: dict[str, set[str]] = rooms, name: str = name) -> bool:
            return any(i == f"{name}.{b}" or i.startswith(f"{name}.{b}.") for i in rooms[a])

        keys = sorted(rooms)
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                if uses(a, b) and uses(b, a):
                    pairs.add((name, a, b))
    return pairs


def engine_keepers(root: Path = PACKAGE / "engine") -> set[str]:
    """Modules of dexcli/engine, other than core.py, that store an Engine on an object."""
    keepers = set()
    for path in root.rglob("*.py"):
        if path.name == "core.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == "engine"
                    and any(isinstance(t, ast.Attribute) and t.attr == "engine" for t in node.targets)):
                keepers.add(path.stem)
    return keepers


def test_no_new_two_way_import_inside_a_package() -> None:
    assert two_way_imports() - TWO_WAY_DEBT == set()


def test_the_two_way_debt_list_names_only_pairs_that_still_exist() -> None:
    assert TWO_WAY_DEBT - two_way_imports() == set()


def test_no_new_engine_helper_keeps_the_engine() -> None:
    assert engine_keepers() - KEEPS_ENGINE_DEBT == set()
    assert KEEPS_ENGINE_DEBT - engine_keepers() == set()


def test_the_checks_see_a_two_way_import_and_a_kept_engine(tmp_path: Path) -> None:
    pkg = tmp_path / "dexcli" / "p"
    pkg.mkdir(parents=True)
    (tmp_path / "dexcli" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from dexcli.p.b import B\n")
    (pkg / "b.py").write_text("from dexcli.p import a\n")
    (pkg / "c.py").write_text("class H:\n    def __init__(self, engine):\n        self.engine = engine\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert two_way_imports(tmp_path / "dexcli") == {("dexcli.p", "a", "b")}
        assert engine_keepers(pkg) == {"c"}
    finally:
        ROOT = saved
