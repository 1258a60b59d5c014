"""Import layering of the product (domain/, projections/, adapters/ and the top-level modules): no
import cycle between modules, counting the imports a function makes and those under `if TYPE_CHECKING:` as
edges too (a circle hidden in a function or from the interpreter is still a circle for the reader), and at
most MAX_LOCAL function-local imports of our own modules, each saying on its line why it is local (start-up cost,
mostly: a heavy optional library or the app loads only for the command that needs it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("domain", "projections", "adapters")
# 23: five of them keep `rollout latest` and `rollout history` from loading what they never use (the
# PostgreSQL backend, the analysis templates, shell completion's reads, the home's binding aggregate:
# tests/unit/test_lazy_commands.py)
MAX_LOCAL = 23
# The only places SQL may live: the store's wing (tables beside the log, in its dialect), the runtime's own table,
# and projections (the views and their query modules). The domain, the service and every face (the CLI, the page,
# the controller, notifications, the entry point) call those: a statement elsewhere couples policy or printing to
# a storage's schema.
SQL_HOMES = ("adapters/store", "adapters/runtime", "projections")
SQL = re.compile(r"\b(SELECT\b.*\bFROM|INSERT\s+INTO|UPDATE\b.*\bSET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX))\b", re.S)
# Circles known and owned elsewhere, each with why it still stands: remove the entry when it is broken.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def _modules() -> dict[str, Path]:
    found = {f"rollouts.{path.stem}": path for path in ROOT.glob("*.py") if path.name != "__init__.py"}
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


def _scan_module(
    name: str, source: str, is_package: bool, known: dict[str, Path]
) -> tuple[set[str], list[tuple[int, str]]]:
    """What one module imports of ours, at any depth (module level, `if TYPE_CHECKING:`, inside a function),
    and the (line, text) of each of those imports made inside a function."""
    tree = ast.parse(source)
    top_level: set[int] = set()  # at module level, or in a module-level `if` (TYPE_CHECKING) or `try`
    for node in tree.body:
        top_level.update(id(sub) for sub in ast.walk(node) if isinstance(sub, ast.Import | ast.ImportFrom))
    in_functions = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for sub in ast.walk(node)
        if isinstance(sub, ast.Import | ast.ImportFrom)
    }
    lines = source.splitlines()
    edges: set[str] = set()
    local: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        targets = _targets(node, name, is_package, known)
        edges.update(t for t in targets if t != name)
        if targets and (id(node) in in_functions or id(node) not in top_level):
            local.append((node.lineno, " ".join(lines[node.lineno - 1 : node.end_lineno])))
    return edges, local


def _scan() -> tuple[dict[str, set[str]], list[tuple[Path, int, str]]]:
    """The import graph (every import of ours is an edge, wherever it is made) and every function-local import."""
    known = _modules()
    graph: dict[str, set[str]] = {}
    local = []
    for name, path in known.items():
        graph[name], found = _scan_module(name, path.read_text(), path.name == "__init__.py", known)
        local += [(path.relative_to(ROOT), line, text) for line, text in found]
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
    assert [c for c in _cycles(graph) if tuple(c) not in KNOWN_CYCLES] == []


def test_the_scan_counts_function_local_and_type_checking_imports_as_edges() -> None:
    known = {f"rollouts.pkg.{m}": Path(f"pkg/{m}.py") for m in ("a", "b", "c", "d")}
    source = """
from typing import TYPE_CHECKING
from . import a
if TYPE_CHECKING:
    from .b import Thing
def f():
    from . import c  # why
class K:
    def g(self):
        import rollouts.pkg.d
"""
    edges, local = _scan_module("rollouts.pkg.x", source, False, known)
    assert edges == {"rollouts.pkg.a", "rollouts.pkg.b", "rollouts.pkg.c", "rollouts.pkg.d"}
    assert local == [(7, "    from . import c  # why"), (10, "        import rollouts.pkg.d")]


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_few_function_local_imports_of_our_modules_each_saying_why() -> None:
    _, local = _scan()
    listed = "\n".join(f"{path}:{line}: {text}" for path, line, text in local)
    assert len(local) <= MAX_LOCAL, f"{len(local)} function-local imports of rollouts modules:\n{listed}"
    unexplained = [f"{path}:{line}" for path, line, text in local if "#" not in text]
    assert unexplained == [], f"a function-local import says why on its line: {unexplained}"


def _sql_in(source: str) -> list[int]:
    """The lines of the string constants in `source` that read as SQL statements (an f-string read whole, each
    of its fields as `{}`: a statement built around a table's name is still a statement)."""
    tree = ast.parse(source)
    parts = {id(value) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for value in node.values}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            text = node.value
        else:
            continue
        if SQL.search(str(text)):
            found.add(node.lineno)
    return sorted(found)


def _outside_sql_homes() -> list[Path]:
    """The product's modules that may hold no SQL: all but those under SQL_HOMES."""
    paths = list(ROOT.glob("*.py")) + [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    homes = [ROOT / home for home in SQL_HOMES]
    return sorted(path for path in paths if not any(path.is_relative_to(home) for home in homes))


def test_no_sql_outside_the_store_the_runtime_and_projections() -> None:
    """A command that holds SQL against a view couples printing to storage (STYLE), and a use case that holds a
    lease's statements couples its policy to a dialect: queries live in a projections query module, the
    runtime's table (adapters/runtime/table.py), or the store's wing (adapters/store, behind its port)."""
    checked = _outside_sql_homes()
    found = [f"{path.relative_to(ROOT)}:{line}" for path in checked for line in _sql_in(path.read_text())]
    assert found == []
    names = {str(path.relative_to(ROOT)) for path in checked}
    faces = (
        "domain/",
        "adapters/service/",
        "adapters/cli/",
        "adapters/web/",
        "adapters/controller/",
        "adapters/notify/",
    )
    for face in faces:
        assert any(name.startswith(face) for name in names), face
    assert "adapters/entry.py" in names


def test_the_sql_finder_sees_statements_and_not_prose() -> None:
    source = """
a = "SELECT name FROM configs WHERE x = ?"
b = f"UPDATE t SET n = {1}"
c = "select the config FROM the list"
d = "Deployments to delete from the list, insert into a set"
e = f"SELECT {x} - max(at) AS age FROM {t}"
g = (
    f"INSERT INTO {t} (k) VALUES ({m}) "
    f"ON CONFLICT (k) DO NOTHING"
)
"""
    assert _sql_in(source) == [2, 3, 6, 8]  # (an f-string read whole, its fields as {})
