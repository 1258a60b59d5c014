"""Import layering of the product (domain/, projections/, adapters/): no import cycle between modules at
module level, and at most 15 function-local imports of our own modules, each saying on its line why it is
local (start-up cost, mostly: a heavy optional library or the app loads only for the command that needs it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "projections", "adapters")
MAX_LOCAL = 15


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(("rollouts",) + (parts[:-1] if parts[-1] == "__init__" else parts))] = path
    return found


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    """Our modules `node` imports (a `from X import Y` may name a module Y of package X)."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        names = [name] + [f"{name}.{alias.name}" for alias in node.names]
    else:
        names = [alias.name for alias in node.names]
    return [n for n in names if n in known]


def _scan() -> tuple[dict[str, set[str]], list[tuple[Path, int, str]]]:
    """The module-level import graph (TYPE_CHECKING blocks left out) and every function-local import."""
    known = _modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    local = []
    for name, path in known.items():
        source = path.read_text()
        tree = ast.parse(source)
        is_package = path.name == "__init__.py"
        top: set[int] = set()
        typing_only: set[int] = set()
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                top.add(id(node))
            elif isinstance(node, ast.If):
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Import | ast.ImportFrom):
                        typing_only.add(id(sub))
        lines = source.splitlines()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom) or id(node) in typing_only:
                continue
            targets = _targets(node, name, is_package, known)
            if not targets:
                continue
            if id(node) in top:
                graph[name].update(t for t in targets if t != name)
            else:
                text = " ".join(lines[node.lineno - 1 : node.end_lineno])
                local.append((path.relative_to(ROOT), node.lineno, text))
    return graph, local


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back_through_others() -> None:
    graph, _ = _scan()
    assert _cycles(graph) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_few_function_local_imports_of_our_modules_each_saying_why() -> None:
    _, local = _scan()
    listed = "\n".join(f"{path}:{line}: {text}" for path, line, text in local)
    assert len(local) <= MAX_LOCAL, f"{len(local)} function-local imports of rollouts modules:\n{listed}"
    unexplained = [f"{path}:{line}" for path, line, text in local if "#" not in text]
    assert unexplained == [], f"a function-local import says why on its line: {unexplained}"
