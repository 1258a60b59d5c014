"""Corrupt caches heal (DESIGN 7.1): a file under projections/ that is not a readable view is a cache miss.

Through the CLI as a real subprocess, on SQLite and PostgreSQL: random bytes, zero length, a
wrong schema and a corrupt catalog, each for a read command, `controller run --once` and
`projections rebuild`. After healing, the answers equal those of the healthy home (I5).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = pytest.mark.slow  # real processes (see tests/test_tiers.py)


if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

VIEWS = ("desired", "history", "audit")


def view_file(home: Path, name: str) -> Path:
    files = sorted(home.glob(f"projections/{name}-*.db"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    assert files, f"no file of view {name} in {home / 'projections'}"
    return files[-1]


def first_table(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'tracking'").fetchall()
    conn.close()
    return sorted(r[0] for r in rows)[0]


def random_bytes(path: Path) -> None:
    path.write_bytes(bytes(range(256)) * 64)


def zero_length(path: Path) -> None:
    path.write_bytes(b"")


def a_directory(path: Path) -> None:
    """What was put where the view's file was: SQLite does not open it at all (an internal error, exit 70)."""
    path.unlink()
    path.mkdir()
    (path / "inside").write_text("x")


def missing_table(path: Path) -> None:
    table = first_table(path)
    conn = sqlite3.connect(path)
    conn.execute(f"DROP TABLE {table}")
    conn.commit()
    conn.close()


def other_columns(path: Path) -> None:
    table = first_table(path)
    conn = sqlite3.connect(path)
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"CREATE TABLE {table} (something TEXT, other INTEGER)")
    conn.commit()
    conn.close()


def catalog_bytes(home: Path) -> None:
    random_bytes(home / "projections" / "catalog.db")


def catalog_columns(home: Path) -> None:
    conn = sqlite3.connect(home / "projections" / "catalog.db")
    conn.execute("DROP TABLE current")
    conn.execute("CREATE TABLE current (projection TEXT, path TEXT, extra BLOB)")
    conn.commit()
    conn.close()


def catalog_a_directory(home: Path) -> None:
    a_directory(home / "projections" / "catalog.db")


def catalog_a_link_to_nothing(home: Path) -> None:
    """(Each made every read and rebuild exit 5: IsADirectoryError, FileExistsError.)"""
    catalog = home / "projections" / "catalog.db"
    catalog.unlink()
    catalog.symlink_to(home / "nowhere")


def every_view(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(home: Path) -> None:
        for name in VIEWS:
            damage(view_file(home, name))

    return apply


CORRUPTIONS = [
    pytest.param(every_view(random_bytes), id="random-bytes"),
    pytest.param(every_view(zero_length), id="zero-length"),
    pytest.param(every_view(a_directory), id="a-directory"),
    pytest.param(every_view(missing_table), id="schema-table-missing"),
    pytest.param(every_view(other_columns), id="schema-other-columns"),
    pytest.param(catalog_bytes, id="catalog-random-bytes"),
    pytest.param(catalog_columns, id="catalog-other-columns"),
    pytest.param(catalog_a_directory, id="catalog-a-directory"),
    pytest.param(catalog_a_link_to_nothing, id="catalog-a-link-to-nothing"),
]
# A rebuild never read the old files' tables, only their tracking: a wrong schema never stopped it.
UNREADABLE = [c for c in CORRUPTIONS if "schema" not in str(c.id)]
SHADOW = [c for c in CORRUPTIONS if c.id in ("random-bytes", "catalog-random-bytes")]
Corrupt = Callable[[Path], None]


def combos(corruptions: list[Any]) -> list[Any]:
    """Every corruption on SQLite; random bytes (view, catalog) also on PostgreSQL: the views are
    local either way, only the log they are rebuilt from differs."""
    pairs = [pytest.param(c.values[0], "sqlite", id=f"sqlite-{c.id}") for c in corruptions]
    return pairs + [pytest.param(c.values[0], "postgres", id=f"postgres-{c.id}") for c in corruptions if c in SHADOW]


def on(backend: str, rollouts: Rollouts, request: pytest.FixtureRequest) -> Rollouts:
    if backend == "postgres":
        url = request.getfixturevalue("postgres_url")
        rollouts.env["ROLLOUTS_STORE"] = url
        rollouts.store = url
    return rollouts


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def answers(rollouts: Rollouts, *, quiet: bool = True) -> dict[str, object]:
    """What a user reads from the views (json); `quiet`: with no warning on the way."""
    got: dict[str, object] = {}
    for args in (("config", "list"), ("rollout", "history", "web"), ("events",), ("audit",)):
        result = ok(rollouts.sh(*args, "-o", "json"))
        assert not quiet or "warning" not in result.stderr, f"{args}: {result.stderr}"
        got[" ".join(args)] = json.loads(result.stdout)
    got["status"] = ok(rollouts.sh("rollout", "status", "web")).stdout
    return got


def settled_home(rollouts: Rollouts) -> dict[str, object]:
    """A config with a complete rollout and every view on disk; its answers."""
    ok(rollouts.sh("config", "create", "web", "--env", "A=1", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web", "--reason", "first"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
    ok(rollouts.sh("config", "set", "web", "--env", "A=2"))
    return answers(rollouts)


def assert_one_warning_no_error(result: Result) -> None:
    lines = result.stderr.splitlines()
    assert any(line.startswith("warning:") and "rebuilding" in line for line in lines), result.stderr
    assert not any(line.startswith("error:") or "Traceback" in line for line in lines), result.stderr


@pytest.mark.parametrize(("corrupt", "backend"), combos(CORRUPTIONS))
def test_a_read_command_rebuilds_a_corrupt_view_with_a_warning_and_answers_as_before(
    rollouts: Rollouts, corrupt: Corrupt, backend: str, request: pytest.FixtureRequest
) -> None:
    rollouts_on = on(backend, rollouts, request)
    before = settled_home(rollouts_on)
    corrupt(rollouts_on.home)
    result = rollouts_on.sh("config", "list", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert_one_warning_no_error(result)
    assert json.loads(result.stdout) == before["config list"]
    history = rollouts_on.sh("rollout", "history", "web")
    assert history.exit_code == 0 and "Complete" in history.stdout, history.stderr
    assert answers(rollouts_on, quiet=False) == before  # the views the first read did not need heal now
    assert answers(rollouts_on) == before


@pytest.mark.parametrize(("corrupt", "backend"), combos(CORRUPTIONS))
def test_the_controller_rebuilds_a_corrupt_view_and_goes_on_reconciling(
    rollouts: Rollouts, request: pytest.FixtureRequest, corrupt: Corrupt, backend: str
) -> None:
    rollouts_on = on(backend, rollouts, request)
    settled_home(rollouts_on)
    ok(rollouts_on.sh("rollout", "latest", "web", "--reason", "second"))
    corrupt(rollouts_on.home)
    result = rollouts_on.sh("controller", "run", "--once")
    assert result.exit_code == 0, result.stderr
    assert_one_warning_no_error(result)
    claimed = ok(rollouts_on.sh("events", "web", "--revision", "2", "--type", "DeployerClaimed", "-o", "json"))
    assert len(json.loads(claimed.stdout)) == 1, "the controller did not claim the waiting deployment"
    ok(rollouts_on.sh("controller", "run", "--until-idle", "--timeout", "30", "-q"))
    live = answers(rollouts_on, quiet=False)
    ok(rollouts_on.sh("projections", "rebuild"))
    assert answers(rollouts_on) == live, "healed views differ from views rebuilt from zero (I5)"
    assert "version 2 (attempt 1): Complete" in str(live["status"])


@pytest.mark.parametrize(("corrupt", "backend"), combos(UNREADABLE))
def test_projections_rebuild_succeeds_over_corrupt_views(
    rollouts: Rollouts, request: pytest.FixtureRequest, corrupt: Corrupt, backend: str
) -> None:
    rebuild_over(on(backend, rollouts, request), corrupt, [])


@pytest.mark.parametrize("corrupt", SHADOW)
def test_projections_rebuild_shadow_succeeds_over_corrupt_views(rollouts: Rollouts, corrupt: Corrupt) -> None:
    rebuild_over(rollouts, corrupt, ["--shadow"])


def rebuild_over(rollouts_on: Rollouts, corrupt: Corrupt, flags: list[str]) -> None:
    before = settled_home(rollouts_on)
    corrupt(rollouts_on.home)
    result = rollouts_on.sh("projections", "rebuild", *flags)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("rebuilt ") == len(VIEWS), result.stdout
    assert not any(line.startswith("error:") for line in result.stderr.splitlines()), result.stderr
    assert answers(rollouts_on) == before
    leftovers = {p.name for p in (rollouts_on.home / "projections").iterdir()}
    assert leftovers <= {"catalog.db", "build.lock", *(view_file(rollouts_on.home, n).name for n in VIEWS)}, leftovers


def test_projections_status_over_a_corrupt_view_reports_instead_of_failing(rollouts: Rollouts) -> None:
    settled_home(rollouts)
    random_bytes(view_file(rollouts.home, "history"))
    result = rollouts.sh("projections", "status", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert_one_warning_no_error(result)
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["history"]["position"] == rows["history"]["head"] > 0


@pytest.mark.parametrize("damage", [a_directory, zero_length], ids=["a-directory", "zero-length"])
def test_frozen_views_are_never_rebuilt_not_even_one_that_is_not_a_file(
    rollouts: Rollouts, damage: Callable[[Path], None]
) -> None:
    """ROLLOUTS_FREEZE_PROJECTIONS=1 serves the views exactly as on disk: a broken one is an error, not a rebuild."""
    settled_home(rollouts)
    path = view_file(rollouts.home, "history")
    damage(path)
    rollouts.env["ROLLOUTS_FREEZE_PROJECTIONS"] = "1"
    result = rollouts.sh("rollout", "history", "web")
    assert result.exit_code != 0 and "is not a readable view" in result.stderr, result
    assert view_file(rollouts.home, "history") == path and (path.is_dir() == (damage is a_directory))


def test_a_running_controller_heals_its_view_emptied_under_it_and_goes_on(rollouts: Rollouts) -> None:
    """Its open connection's cached pages would hide the damage: each pass it looks at the file (stat).
    (Bytes written in place are seen by the next process that opens the file, which heals it; SQLite
    itself reads the pages its WAL holds from there, so a file replaced under a WAL may read well.)"""
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    controller = rollouts.popen("controller", "run", "--interval", "0.05", "-q")
    try:
        ok(rollouts.sh("rollout", "latest", "web"))
        ok(rollouts.sh("rollout", "status", "web", "--watch", "--timeout", "30"))
        zero_length(view_file(rollouts.home, "desired"))
        ok(rollouts.sh("rollout", "latest", "web"))
        assert (
            "version 2 (attempt 1): Complete"
            in ok(rollouts.sh("rollout", "status", "web", "--watch", "--timeout", "30")).stdout
        )
    finally:
        controller.terminate()
        _, stderr = controller.communicate(timeout=30)
    assert controller.returncode == 0, stderr
    healed = [line for line in stderr.splitlines() if line.startswith("warning: projection desired")]
    assert healed and "rebuilding it" in healed[0], stderr
    live = answers(rollouts, quiet=False)
    ok(rollouts.sh("projections", "rebuild"))
    assert answers(rollouts) == live
