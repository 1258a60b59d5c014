"""One name for the deployment number: `revision` in every view table the projections build (issue #30).

What the program prints keeps DESIGN 7's `version` (service/documents.py renames it there); the views,
like the events and the runtime table, say `revision`. A home whose views were built before the rename
rebuilds them on open and prints the same documents.
"""

from __future__ import annotations

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
