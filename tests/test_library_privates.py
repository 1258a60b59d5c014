"""The product reaches the eventsourcing library through its public names only: no attribute of another
object whose name the library keeps private (`pool._create_connection`, `conn._sqlite_conn`...).

An override of the library's own method in a subclass (`super()._insert_events(...)`, `self._...`) is its
extension point, not a reach into another object. The source is parsed with `ast`, nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import eventsourcing

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("domain", "projections", "adapters")


def private_names(paths: list[Path]) -> set[str]:
    """The single-underscore names these files define or use as attributes."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", None)
            if isinstance(name, str) and name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names


def defined_here(paths: list[Path]) -> set[str]:
    """The private names our own code defines (a method, or an attribute it assigns on `self`)."""
    names: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return names


def reaches(path: Path, private: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Attribute) or node.attr not in private:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    return found


def test_the_product_uses_no_private_attribute_of_the_library_on_another_object() -> None:
    ours = sorted(path for part in PRODUCT for path in (ROOT / part).rglob("*.py"))
    private = private_names(list(Path(eventsourcing.__file__).parent.rglob("*.py"))) - defined_here(ours)
    found = [hit for path in ours for hit in reaches(path, private)]
    assert found == []
