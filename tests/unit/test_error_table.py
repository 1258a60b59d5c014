"""The CLI's error table: each kind of error has its exit code, by type; anything else is a bug (70)."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest
from eventsourcing.persistence import OperationalError

from rollouts.adapters.cli.errors import CONFLICT, INTERNAL, MISSING, REFUSED, STORE, USAGE, exit_code_for
from rollouts.adapters.service.application import NotUTF8, WriteConflict
from rollouts.adapters.store.binding import HomeBoundElsewhere
from rollouts.adapters.store.failures import is_lock_timeout, missing_table
from rollouts.adapters.store.port import StoreUnavailable
from rollouts.adapters.store.url import BadStoreURL
from rollouts.domain.errors import Conflict, DomainError, IllegalTransition, NotFound, StoreProblem, UsageError
from rollouts.projections.health import BrokenView
from rollouts.projections.records import UndecodableEvent
from rollouts.projections.store import UnknownProjection


def sqlite_error(make: str, tmp_path: Path) -> sqlite3.Error:
    """A real error from the sqlite3 driver, with its result code."""
    path = tmp_path / "db"
    if make == "not a database":
        path.write_bytes(b"this is not a database file at all" * 200)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        if make == "busy":
            holder.execute("CREATE TABLE t (x)")
            holder.execute("BEGIN IMMEDIATE")
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            if make == "busy":
                other.execute("BEGIN IMMEDIATE")
            elif make == "not a database":
                other.execute("SELECT * FROM sqlite_master")
            else:
                other.execute("SELECT * FROM locked")  # SQLITE_ERROR, though its text says "locked"
        finally:
            other.close()
    except sqlite3.Error as error:
        return error
    finally:
        holder.close()
    raise AssertionError(f"no sqlite error for {make}")


def wrapped(error: Exception) -> OperationalError:
    """`error` as eventsourcing raises it: its own class, caused by the driver's."""
    try:
        raise OperationalError(error) from error
    except OperationalError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "code"),
    [
        pytest.param(UsageError("x"), USAGE, id="usage"),
        pytest.param(BadStoreURL("x"), USAGE, id="bad store url"),
        pytest.param(UnknownProjection("x"), USAGE, id="unknown projection"),
        pytest.param(NotUTF8("x"), USAGE, id="text that is not utf-8"),
        pytest.param(DomainError("x"), REFUSED, id="refused"),
        pytest.param(IllegalTransition("x"), REFUSED, id="illegal transition"),
        pytest.param(Conflict("x"), CONFLICT, id="conflict"),
        pytest.param(WriteConflict("x"), CONFLICT, id="write conflict"),
        pytest.param(NotFound("x"), MISSING, id="not found"),
        pytest.param(StoreProblem("x"), STORE, id="store"),
        pytest.param(StoreUnavailable("x"), STORE, id="store unavailable"),
        pytest.param(HomeBoundElsewhere("x"), STORE, id="home bound elsewhere"),
        pytest.param(BrokenView("history", None, "x"), STORE, id="view that stays broken"),
        pytest.param(UndecodableEvent("the event at position 3", ValueError("x")), STORE, id="undecodable event"),
        pytest.param(FileExistsError(errno.EEXIST, "File exists"), STORE, id="home is a file"),
        pytest.param(NotADirectoryError(errno.ENOTDIR, "Not a directory"), STORE, id="not a directory"),
        pytest.param(PermissionError(errno.EACCES, "Permission denied"), STORE, id="no permission"),
        pytest.param(OSError(errno.ENOSPC, "No space left on device"), STORE, id="disk full"),
        pytest.param(ValueError("an invariant of the executor"), INTERNAL, id="a bug's ValueError"),
        pytest.param(KeyError("x"), INTERNAL, id="a bug's KeyError"),
        pytest.param(RuntimeError("x"), INTERNAL, id="a bug's RuntimeError"),
        pytest.param(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), INTERNAL, id="bare decode"),
    ],
)
def test_each_kind_of_error_has_its_exit_code(error: BaseException, code: int) -> None:
    assert exit_code_for(error) == code


@pytest.mark.parametrize(
    ("make", "code"),
    [
        pytest.param("busy", CONFLICT, id="lock held past the timeout"),
        pytest.param("not a database", STORE, id="corrupt database"),
        pytest.param("no such table", INTERNAL, id="an SQL error of the program"),
    ],
)
def test_driver_errors_are_sorted_by_their_code_bare_or_wrapped(make: str, code: int, tmp_path: Path) -> None:
    error = sqlite_error(make, tmp_path)
    assert exit_code_for(error) == code
    assert exit_code_for(wrapped(error)) == code


def test_a_lock_timeout_is_told_by_the_driver_code_not_by_the_text(tmp_path: Path) -> None:
    assert is_lock_timeout(wrapped(sqlite_error("busy", tmp_path)))
    no_such_table = sqlite_error("no such table", tmp_path)
    assert "locked" in str(no_such_table)
    assert not is_lock_timeout(wrapped(no_such_table))


def test_an_error_without_a_driver_code_falls_back_to_its_text() -> None:
    assert is_lock_timeout(OperationalError("database is locked"))
    assert not is_lock_timeout(OperationalError("disk I/O error"))


def test_a_missing_table_is_told_from_other_sql_errors(tmp_path: Path) -> None:
    no_such_table = sqlite_error("no such table", tmp_path)
    assert missing_table(no_such_table) and missing_table(wrapped(no_such_table))
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x)")
    with pytest.raises(sqlite3.OperationalError) as no_such_column:
        db.execute("SELECT y FROM t")
    assert not missing_table(no_such_column.value)
    assert not missing_table(sqlite_error("busy", tmp_path))
