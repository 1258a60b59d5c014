"""Errors by type at the CLI: the environment is exit 5, a damaged log is exit 5 naming where, a bug is exit 70
with its traceback in a private file whose path the one error line gives."""

from __future__ import annotations

import re
import sqlite3
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = pytest.mark.slow  # real processes

if TYPE_CHECKING:
    from tests.conftest import Result, Rollouts

STORE, INTERNAL = 5, 70
CRASH_LINE = re.compile(r"error: internal error \((\w+): (.*)\); details in (\S+)\n")


def one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result
    assert "Traceback" not in result.stdout + result.stderr, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result
    return result


@pytest.fixture
def deployed(rollouts: Rollouts) -> Rollouts:
    """A home whose config web has version 1 Complete (a runtime database, views, a log of a dozen events)."""
    ok(rollouts.sh("config", "create", "web", "--", "true"))
    ok(rollouts.sh("rollout", "latest", "web"))
    ok(rollouts.sh("controller", "run", "--until-idle", "--timeout", "60", "-q"))
    return rollouts


@pytest.mark.parametrize("args", [("deployers", "list"), ("controller", "run", "--once", "-q")])
def test_a_corrupt_runtime_database_is_exit_5(deployed: Rollouts, args: tuple[str, ...]) -> None:
    runtime_db = deployed.home / "runtime" / "runtime.db"
    for side in runtime_db.parent.glob("runtime.db-*"):
        side.unlink()
    runtime_db.write_bytes(b"\x13\x37 not an SQLite file " * 300)
    line = one_error_line(deployed.sh(*args), STORE)
    assert "not a database" in line


@pytest.mark.parametrize("args", [("config", "list"), ("config", "create", "web", "--", "true")])
def test_a_home_that_is_a_file_is_exit_5(rollouts: Rollouts, args: tuple[str, ...]) -> None:
    rollouts.home.write_text("not a directory\n")
    one_error_line(rollouts.sh(*args), STORE)


def tamper(home: Path, position: int, state: bytes) -> None:
    with sqlite3.connect(home / "events.db") as db:
        assert db.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (state, position)).rowcount == 1


@pytest.mark.parametrize(
    "state", [pytest.param(b"\xff\xfe\x00garbage", id="not utf-8"), pytest.param(b"{not json", id="not json")]
)
@pytest.mark.parametrize(
    "args",
    [("projections", "rebuild"), ("rollout", "history", "web"), ("events",), ("rollout", "retry", "web")],
)
def test_an_event_that_cannot_be_decoded_is_exit_5_naming_it_and_pointing_to_log_verify(
    deployed: Rollouts, state: bytes, args: tuple[str, ...]
) -> None:
    position = 4  # an event of deployment web v1, past its first
    tamper(deployed.home, position, state)
    before = deployed.event_count()
    line = one_error_line(deployed.sh(*args), STORE)
    assert "rollouts log verify" in line, line
    assert f"position {position}" in line or "event " in line, line
    if args[0] == "projections":
        assert f"the event at position {position} cannot be decoded" in line
    assert deployed.event_count() == before
    assert deployed.sh("log", "verify").exit_code == 1  # which does say where


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("originator_id = CAST(originator_id AS BLOB)", id="id a blob"),
        pytest.param("state = NULL", id="state null"),
        pytest.param("state = 5", id="state a number"),
        pytest.param("topic = NULL", id="topic null"),
    ],
)
def test_a_column_edited_to_another_type_is_a_break_for_log_verify_and_damage_for_the_rest(
    deployed: Rollouts, change: str
) -> None:
    """`log verify` says where (exit 1), and `audit` that the log is damaged (exit 5): both crashed (exit 70)
    on a BLOB id, a NULL or a number, as the commands that fold the log did. Those answer, or say the log is
    damaged where they decode the event (a rebuild's SQLite copies the audit rows of what it does not decode)."""
    position = 4
    with sqlite3.connect(deployed.home / "events.db") as db:
        assert db.execute(f"UPDATE stored_events SET {change} WHERE rowid = ?", (position,)).rowcount == 1
    before = deployed.event_count()
    verified = deployed.sh("log", "verify")
    assert verified.exit_code == 1 and f"BROKEN at position {position}: " in verified.stdout, verified
    line = one_error_line(deployed.sh("audit"), STORE)
    assert f"the event at position {position} cannot be decoded" in line and "rollouts log verify" in line, line
    for args in (("projections", "rebuild"), ("events",), ("rollout", "history", "web")):
        result = deployed.sh(*args)
        if result.exit_code != 0:
            assert "cannot be decoded" in one_error_line(result, STORE), result
    assert deployed.event_count() == before
    assert not list((deployed.home / "runtime").glob("crash-*"))


def crash_in(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom: an invariant broke")

    monkeypatch.setattr(target, boom)


def test_a_bug_is_exit_70_with_one_line_and_its_traceback_in_a_private_file_in_the_home(
    rollouts: Rollouts, monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(rollouts.run("config", "create", "web", "--", "true"))
    crash_in(monkeypatch, "rollouts.adapters.service.promotion.latest")
    result = rollouts.run("rollout", "latest", "web")
    match = CRASH_LINE.fullmatch(result.stderr)
    assert match, result
    assert result.exit_code == INTERNAL and result.stdout == ""
    assert match[1] == "RuntimeError" and match[2] == "boom: an invariant broke"
    report = Path(match[3])
    assert report.parent == rollouts.home / "runtime" and report.name.startswith("crash-")
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    text = report.read_text()
    assert text.startswith("Traceback") and "in latest" in text and "RuntimeError: boom" in text


def test_a_bug_where_there_is_no_home_leaves_its_traceback_in_a_temporary_file(
    rollouts: Rollouts, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    crash_in(monkeypatch, "rollouts.projections.history_queries.configs")
    result = rollouts.run("config", "list")  # a read on a missing home: it warns first, and creates nothing
    assert result.exit_code == INTERNAL, result
    match = CRASH_LINE.search(result.stderr)
    assert match and result.stderr.count("error:") == 1, result.stderr
    report = Path(match[3])
    assert report.parent == tmp_path and stat.S_IMODE(report.stat().st_mode) == 0o600
    assert "RuntimeError: boom" in report.read_text()
    assert not rollouts.home.exists()
