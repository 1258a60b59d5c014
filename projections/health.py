"""Telling a projection file that is a readable view from one that is not (a cache miss, rebuilt)."""

from __future__ import annotations

import sqlite3
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..domain.errors import StoreProblem
from . import files
from .file_checks import BROKEN_CODES, file_problem, is_broken, primary_code
from .files import CatalogLost
from .projection import Projection

if TYPE_CHECKING:
    import sqlite_utils


_BUILD_AGAIN_CODES = BROKEN_CODES | {10}  # and SQLITE_IOERR, for a build (see broke_a_file)


class WorkerFailed(RuntimeError):
    """A rebuild's worker process failed (its message says why); `broken`: a file it read or wrote
    was not what it should be (see health.broke_a_file)."""

    def __init__(self, message: str, broken: bool = False) -> None:
        super().__init__(message)
        self.broken = broken


class BrokenView(StoreProblem):
    """A projection file that cannot serve: `why` says what is wrong with it."""

    def __init__(self, name: str, path: Path | None, why: str) -> None:
        super().__init__(f"projection {name} ({path.name if path else 'no file'}) is not a readable view: {why}")
        self.name = name
        self.path = path
        self.why = why


def broke_a_file(error: BaseException) -> bool:
    """Whether `error`, raised by a build, says that a file it read or wrote is not what it should be:
    an SQLite error of that kind (`is_broken`), or an I/O error (its side files removed under it, as
    an operator putting old projections back does), in this thread, in a rebuild's writer thread
    (chained) or in a build worker; or a catalog lost, or a live view found broken. The log being the
    truth, the build may start again from it (a disk that keeps failing fails it again)."""

    if isinstance(error, (CatalogLost, BrokenView, FileNotFoundError)):  # (its own file removed under it)
        return True
    if isinstance(error, WorkerFailed):
        return error.broken
    return any(primary_code(e) in _BUILD_AGAIN_CODES for e in (error, error.__cause__) if e is not None)


def catalog_readable(path: Path) -> bool:
    """Whether the catalog at `path` reads now, through a connection of its own (the pages another
    connection has cached may hide bytes written over the file). A missing file reads as empty."""
    if file_problem(path):
        return False
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=files.BUSY_TIMEOUT_S)
    except sqlite3.OperationalError:
        return True  # gone: a new one will be made
    try:
        conn.execute("SELECT name, file FROM current LIMIT 1").fetchall()
        return True
    except sqlite3.DatabaseError as error:
        return not is_broken(error)  # busy, I/O: it cannot tell, and the caller's own error says more
    finally:
        conn.close()


def integrity_problem(db: sqlite_utils.Database) -> str | None:
    """What SQLite's quick check finds wrong with the whole file (slow: only after an error)."""
    try:
        first = db.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as error:
        if not is_broken(error):
            raise
        return " ".join(str(error).split())
    return None if first and first[0] == "ok" else f"quick check: {first[0] if first else 'no answer'}"


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


@cache
def expected_columns(projection: Projection) -> dict[str, list[str]]:
    """Every table of `projection`'s file and its columns, as its code creates them."""
    import sqlite_utils  # start-up cost: only where a view is opened

    db = sqlite_utils.Database(sqlite3.connect(":memory:"), execute_plugins=False)
    try:
        db.execute(files.TRACKING)
        projection.create(db)
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: _columns(db.conn, t) for t in tables}
    finally:
        db.close()


def schema_problem(db: sqlite_utils.Database, projection: Projection) -> str | None:
    """What keeps `db` from serving `projection` (None when it can); busy and I/O errors propagate."""
    try:
        for table, columns in expected_columns(projection).items():
            found = _columns(db.conn, table)
            if not found:
                return f"table {table} is missing"
            if found != columns:
                return f"table {table} has other columns"
        if files.tracked(db, projection.name) is None:
            return "it tracks no position"
    except sqlite3.DatabaseError as error:
        if not is_broken(error):
            raise
        return " ".join(str(error).split())
    return None
