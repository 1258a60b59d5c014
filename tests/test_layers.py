"""The import layers hold: domain < projections < store (and the other infrastructure: the runtime, the
home, settings) < service < faces (the controller and notifier, then the web page, then the CLI, then the
program's entry). A module imports only its own layer or those below it, nothing imports `tests` or
`bench`, and nothing outside the store wing names one of its backends.

Every import counts, at module level or inside a function (or under TYPE_CHECKING), absolute or relative:
the source is parsed with `ast`, nothing is imported to check it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repo root is the package `rollouts`
PRODUCT = ("domain", "projections", "adapters")
# The rank of each room, by the longest dotted prefix (under `rollouts.`) that names it.
RANKS: dict[str, int] = {
    "domain": 0,
    "projections": 1,
    "adapters": 2,  # the package itself, and what is not named below: the home, identity, settings
    "adapters.store": 2,
    "adapters.analysis": 2,
    "adapters.runtime": 2,
    "adapters.service": 3,
    "adapters.controller": 4,
    "adapters.notify": 4,
    "adapters.web": 5,
    "adapters.cli": 6,
    "adapters.entry": 7,
    "": 7,  # rollouts/__init__.py and rollouts/__main__.py
}
BACKENDS = ("adapters.store.sqlite", "adapters.store.postgres")  # named only inside adapters.store
OUTSIDE = ("tests", "bench")


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


def ours(name: str) -> str | None:
    """The dotted name under the package (`rollouts.domain.x` -> `domain.x`; `domain.x` as it is), or None."""
    parts = name.split(".")
    if parts[0] == "rollouts":
        return ".".join(parts[1:])
    return name if parts[0] in (*PRODUCT, *OUTSIDE) else None


def rank(name: str) -> int | None:
    """The layer of a dotted name under the package (None: tests or bench, which rank nowhere)."""
    if name.split(".")[0] in OUTSIDE:
        return None
    best = max((p for p in RANKS if p == "" or name == p or name.startswith(p + ".")), key=len)
    return RANKS[best]


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def crossings(root: Path) -> list[tuple[str, str]]:
    """Every (importing module, imported name) pair that goes up a layer, into tests or bench, or names a
    backend from outside the store wing."""
    found: list[tuple[str, str]] = []
    files = [root / "__init__.py", root / "__main__.py", *(p for d in PRODUCT for p in (root / d).rglob("*.py"))]
    for path in sorted(p for p in files if p.exists()):
        importer = module_name(path, root)
        mine = ours(importer) or ""
        names = imported(path, root)
        for name in sorted(names):
            target = ours(name)
            if target is None or any(other.startswith(name + ".") for other in names):
                continue  # not ours, or a package whose named member is what counts
            theirs = rank(target)
            if (
                theirs is None
                or theirs > (rank(mine) or 0)
                or (any(within(target, b) for b in BACKENDS) and not within(mine, "adapters.store"))
            ):
                found.append((importer, name))
    return found


def test_no_module_imports_a_layer_above_its_own_nor_tests_or_bench() -> None:
    found = crossings(ROOT)
    assert not found, f"imports that cross a layer the wrong way: {found}"


def test_the_check_sees_function_level_relative_and_type_checking_imports(tmp_path: Path) -> None:
    for room in ("domain", "projections", "adapters/store/sqlite", "adapters/cli", "adapters/service"):
        (tmp_path / room).mkdir(parents=True)
    (tmp_path / "domain" / "rules.py").write_text("def f():\n    from ..adapters import cli\n")
    (tmp_path / "domain" / "spec.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rollouts.projections.rows import Table\n"
    )
    (tmp_path / "projections" / "view.py").write_text(
        "from rollouts.domain import ids\nimport rollouts.adapters.service.x\n"
    )
    (tmp_path / "adapters" / "service" / "use.py").write_text(
        "from ..store.sqlite import backend\nfrom .. import cli\n"
    )
    (tmp_path / "adapters" / "store" / "open.py").write_text("from .sqlite import backend\nfrom ...domain import ids\n")
    (tmp_path / "adapters" / "cli" / "main.py").write_text("from rollouts import projections\nimport bench.generate\n")
    assert {(importer, ours(name)) for importer, name in crossings(tmp_path)} == {
        ("rollouts.adapters.cli.main", "bench.generate"),
        ("rollouts.domain.rules", "adapters.cli"),
        ("rollouts.domain.spec", "projections.rows.Table"),
        ("rollouts.projections.view", "adapters.service.x"),
        ("rollouts.adapters.service.use", "adapters.store.sqlite.backend"),
        ("rollouts.adapters.service.use", "adapters.cli"),
    }
