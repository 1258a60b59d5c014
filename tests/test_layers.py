"""The import layers hold: `domain` imports nothing of `projections` or `adapters`, `projections` nothing of
`adapters`, and nothing in the product imports `tests` or `bench`.

Every import counts, at module level or inside a function (or under TYPE_CHECKING), absolute or relative:
the source is parsed with `ast`, nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repo root is the package `rollouts`
PRODUCT = ("domain", "projections", "adapters")
FORBIDDEN = {
    "domain": ("projections", "adapters", "tests", "bench"),
    "projections": ("adapters", "tests", "bench"),
    "adapters": ("tests", "bench"),
    "": ("tests", "bench"),  # rollouts/__init__.py and rollouts/__main__.py
}
# (importing module, imported module) -> why the pair is allowed for now. Empty: no layer is crossed.
KNOWN: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["rollouts", *parts])


def imported(path: Path, root: Path) -> set[str]:
    """The dotted names a file imports, relative imports resolved against its package."""
    name = module_name(path, root)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def layer(name: str) -> str | None:
    """The top-level part of the tree a dotted name belongs to: `rollouts.domain.x` and `domain.x` are `domain`."""
    parts = name.split(".")
    if parts[0] == "rollouts":
        parts = parts[1:]
    return parts[0] if parts and parts[0] in (*PRODUCT, "tests", "bench") else None


def crossings(root: Path) -> list[tuple[str, str]]:
    """Every (importing module, imported name) pair that crosses a layer the wrong way."""
    found: list[tuple[str, str]] = []
    files = [root / "__init__.py", root / "__main__.py", *(p for d in PRODUCT for p in (root / d).rglob("*.py"))]
    for path in sorted(p for p in files if p.exists()):
        importer = module_name(path, root)
        own = path.relative_to(root).parts[0] if len(path.relative_to(root).parts) > 1 else ""
        for name in sorted(imported(path, root)):
            if layer(name) in FORBIDDEN[own]:
                found.append((importer, name))
    return found


def test_no_module_imports_a_layer_above_its_own_nor_tests_or_bench() -> None:
    found = [pair for pair in crossings(ROOT) if pair not in KNOWN]
    assert not found, f"imports that cross a layer the wrong way: {found}"
    stale = [pair for pair in KNOWN if pair not in crossings(ROOT)]
    assert not stale, f"KNOWN lists pairs no module imports any more: {stale}"


def test_the_check_sees_function_level_relative_and_type_checking_imports(tmp_path: Path) -> None:
    (tmp_path / "domain").mkdir()
    (tmp_path / "projections").mkdir()
    (tmp_path / "adapters").mkdir()
    (tmp_path / "domain" / "rules.py").write_text("def f():\n    from ..adapters import cli\n")
    (tmp_path / "domain" / "spec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rollouts.projections.rows import Table\n"
    )
    (tmp_path / "projections" / "view.py").write_text(
        "from rollouts.domain import ids\nimport rollouts.adapters.home\n"
    )
    (tmp_path / "adapters" / "cli.py").write_text("from rollouts import projections\nimport bench.generate\n")
    assert {(importer, layer(name)) for importer, name in crossings(tmp_path)} == {
        ("rollouts.adapters.cli", "bench"),
        ("rollouts.domain.rules", "adapters"),
        ("rollouts.domain.spec", "projections"),
        ("rollouts.projections.view", "adapters"),
    }
