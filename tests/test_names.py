"""One name per thing: `revision` for the deployment number in every view table the projections build (issue
#30), and each class, type alias and function of the product defined once, under a name of its own (issue 47).

What the program prints keeps DESIGN 7's `version` (adapters/service/documents.py renames it there); the views,
like the events and the runtime table, say `revision`. A home whose views were built before the rename
rebuilds them on open and prints the same documents.
"""

from __future__ import annotations

import ast
import json
import sqlite3
from pathlib import Path

from rollouts.projections.registry import ALL
from tests.conftest import Result, Rollouts

# (table, column) -> why a column may be called `version` or `*_version`: none of these is a deployment's number.
ALLOWED = {
    ("events", "stream_version"): "the library's number of the event in its stream (events -o json, DESIGN 7)",
    ("tracking", "version"): "the projection's code version (Projection.version), which a rebuild follows",
}
# The columns that held the deployment number before the rename, by table (to make a view of before it).
RENAMED = {
    "configs": ("latest_revision", "latest_version"),
    "deployments": ("revision", "version"),
    "steps": ("revision", "version"),
    "open_deployments": ("revision", "version"),
    "events": ("revision", "version"),
    "streams": ("revision", "version"),
}
DOCUMENTS = (
    ("rollout", "history", "web", "-o", "json"),
    ("rollout", "history", "web", "--revision", "2", "-o", "json"),
    ("rollout", "history", "web"),
    ("rollout", "status", "web", "-o", "json"),
    ("events", "-o", "json"),
    ("events", "web", "--revision", "1"),
    ("config", "list", "-o", "json"),
    ("config", "show", "web", "-o", "json"),
    ("audit",),  # (it reads every view: desired too)
)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def home_with_views(rollouts: Rollouts) -> dict[str, Path]:
    """Config web with two deployments (the second cancelled), every view built: each view's file by name."""
    ok(rollouts.run("config", "create", "web", "--pre-hook", "true", "--", "true"))
    ok(rollouts.run("rollout", "latest", "web"))
    ok(rollouts.run("rollout", "latest", "web", "--supersede", "--reason", "second"))
    ok(rollouts.run("projections", "rebuild"))
    folder = rollouts.home / "projections"
    with sqlite3.connect(folder / "catalog.db") as catalog:
        files = {name: folder / Path(file).name for name, file in catalog.execute("SELECT name, file FROM current")}
    assert set(files) == {p.name for p in ALL}
    return files


def columns(path: Path) -> dict[str, list[str]]:
    """Each table of the file and its columns."""
    with sqlite3.connect(path) as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: [row[1] for row in db.execute(f"PRAGMA table_info({t})")] for t in tables}


def test_no_view_table_calls_the_deployment_number_version(rollouts: Rollouts) -> None:
    found = {(t, c) for path in home_with_views(rollouts).values() for t, cs in columns(path).items() for c in cs}
    assert sorted(c for c in found - set(ALLOWED) if c[1] == "version" or c[1].endswith("_version")) == []
    assert {(t, new) for t, (new, _) in RENAMED.items()} <= found  # (the tables looked at are the views')


def test_views_built_before_the_rename_are_rebuilt_and_print_the_same(rollouts: Rollouts) -> None:
    files = home_with_views(rollouts)
    before = [ok(rollouts.run(*args)) for args in DOCUMENTS]
    assert '"version": 2' in before[0].stdout and '"latest_version": 2' in before[6].stdout
    for p in ALL:  # as the code before the rename left them: the old columns, tracked at the old version
        with sqlite3.connect(files[p.name]) as db:
            for table, names in columns(files[p.name]).items():
                if table in RENAMED and RENAMED[table][0] in names:
                    db.execute(f"ALTER TABLE {table} RENAME COLUMN {RENAMED[table][0]} TO {RENAMED[table][1]}")
            db.execute("UPDATE tracking SET version = version - 1")
    after = [rollouts.run(*args) for args in DOCUMENTS]
    assert [(r.exit_code, r.stdout) for r in after] == [(0, r.stdout) for r in before]
    assert "rebuilding it" in "".join(r.stderr for r in after)
    for p in ALL:
        with sqlite3.connect(rollouts.home / "projections" / "catalog.db") as catalog:
            (file,) = catalog.execute("SELECT file FROM current WHERE name = ?", (p.name,)).fetchone()
        built = columns(rollouts.home / "projections" / Path(file).name)
        assert all(RENAMED[t][0] in cs for t, cs in built.items() if t in RENAMED), (p.name, built)
    status = json.loads(ok(rollouts.run("projections", "status", "-o", "json")).stdout)
    assert all(not view["stale"] for view in status)


# -- one name per type, and one definition per function (issue 47) ------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("domain", "projections", "adapters")
# name -> (the modules that define it, why the name is shared for now). Every other class or type alias of the
# product has one defining module; an entry here goes once its reason does.
SHARED: dict[str, tuple[set[str], str]] = {}


def _defined(tree: ast.Module) -> list[tuple[str, ast.stmt]]:
    """The module's top-level classes, functions and assignments, by name (a TypeVar left out: it is local to
    the signatures of its module)."""
    found: list[tuple[str, ast.stmt]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            found.append((node.name, node))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "TypeVar":
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [(t.id, node) for t in targets if isinstance(t, ast.Name)]
    return found


def _definitions() -> dict[str, dict[str, ast.stmt]]:
    """Each top-level name of the product: the modules that define it, and how."""
    found: dict[str, dict[str, ast.stmt]] = {}
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name, node in _defined(ast.parse(path.read_text())):
                found.setdefault(name, {})[path.relative_to(ROOT).as_posix()] = node
    return found


def _is_type_name(name: str) -> bool:
    """CapWords (`Row`, `DirectLog`): a class or a type alias, not a CONSTANT."""
    return name[:1].isupper() and not name.isupper()


def _body(node: ast.stmt) -> str:
    """A function's code without its docstring, to tell a copy from another function of the same name."""
    assert isinstance(node, ast.FunctionDef)
    body = node.body[1:] if ast.get_docstring(node) is not None else node.body
    return "\n".join(ast.dump(statement) for statement in body) + ast.dump(node.args)


def test_each_class_and_type_alias_has_one_name_and_one_definition() -> None:
    """A type a reader meets in signatures (Row, Meta, Home, Log, Verdict...) is one thing, defined once:
    the same shape imported from where it is defined, different things under different names."""
    shared = {
        name: set(where)
        for name, where in _definitions().items()
        if _is_type_name(name) and len(where) > 1 and set(where) != SHARED.get(name, (set(), ""))[0]
    }
    assert shared == {}, f"define it once and import it, or give each thing its own name: {shared}"


def test_no_function_is_defined_twice() -> None:
    """The same function in two modules (`dashed` was in three) is one definition imported. (Functions of one
    name doing different things at different layers, as the `cancel` command and the domain's `cancel`, are
    the same word end to end.)"""
    copies = [
        (name, sorted(where))
        for name, where in _definitions().items()
        if len(where) > 1
        and all(isinstance(n, ast.FunctionDef) for n in where.values())
        and len({_body(n) for n in where.values()}) < len(where)
    ]
    assert copies == [], f"one definition, imported where it is used: {copies}"


def test_the_name_checks_see_a_shared_alias_and_a_copied_function() -> None:
    one = ast.parse('Row = dict[str, Any]\nT = TypeVar("T")\ndef dashed(h):\n    """Doc."""\n    return h\n')
    two = ast.parse("Row = tuple[Any, ...]\ndef dashed(h):\n    return h\n")
    assert [n for n, _ in _defined(one)] == ["Row", "dashed"]
    assert _is_type_name("Row") and _is_type_name("DirectLog") and not _is_type_name("BATCH")
    first, second = dict(_defined(one))["dashed"], dict(_defined(two))["dashed"]
    assert _body(first) == _body(second)
