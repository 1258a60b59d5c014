"""The views folded from the log into a private folder (for `audit`), and which live views differ from them.

The views in a home's projections folder are files anyone who can write the home may edit. What
`audit` checks must be the log's own account, so it folds the log again with the very code that
rebuilds the views (build.build), into files no other process knows, and compares the live views
with them table by table: a view whose rows are not the log's fold is named (I5).
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlite_utils

from . import build, build_worker, files
from .diff import Bounded
from .projection import Projection
from .rebuild import paused_gc
from .registry import ALL, BY_NAME
from .source import EventSource, direct_log

if TYPE_CHECKING:
    from .store import ProjectionStore

TRIES = 3  # a live view that moved while it was compared is compared again, at its new position


@dataclass(frozen=True)
class Differing:
    """A live view whose rows are not the log's fold at its position: per table, how many rows differ."""

    name: str
    position: int
    tables: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "position": self.position, "tables": self.tables}


class Refold:
    """Every view folded from zero to `head` into a temporary folder, removed by close().

    The audit view is folded here, first; the others, from a long log the build can read itself, by
    a process of their own (build_worker, as a rebuild does), which goes on while the caller checks
    the audit view: differing() waits for it."""

    def __init__(self, source: EventSource, head: int, log_id: str) -> None:
        self.source = source
        self.log_id = log_id
        self._folder = tempfile.TemporaryDirectory(prefix="rollouts-audit-")
        self._dbs: dict[str, sqlite_utils.Database] = {}
        self._worker: build_worker.BuildWorker | None = None
        try:
            self.position = self._start(head)
        except BaseException:
            self.close()
            raise

    def _start(self, head: int) -> int:
        log = direct_log(Bounded(self.source, head))
        if log is None or head < build.PARALLEL_FROM:
            return self._fold(ALL, head, "")
        others = {p.name: self._path(p, "") for p in ALL if p.name != "audit"}
        # (the files are compared by key and then removed: the indexes that enforce nothing would go unread)
        self._worker = build_worker.start(others, log, head, self.log_id, build.REBUILD_BATCH, indexes=False)
        return self._fold((BY_NAME["audit"],), head, "")

    def _wait(self) -> None:
        """The other views folded too (the worker reads to exactly the same position)."""
        if self._worker is not None:
            worker, self._worker = self._worker, None
            worker.result()

    def _path(self, p: Projection, suffix: str) -> Path:
        return Path(self._folder.name) / f"{p.name}{suffix}.db"

    def _fold(self, projections: tuple[Projection, ...], head: int, suffix: str) -> int:
        paths = {p.name: self._path(p, suffix) for p in projections}
        with paused_gc():
            bounded = Bounded(self.source, head)
            return build.build(bounded, projections, paths, head, self.log_id, build.REBUILD_BATCH, indexes=False)

    def db(self, name: str) -> sqlite_utils.Database:
        """The folded view `name`, read-only (a view of the worker's once it is done)."""
        if name != "audit":
            self._wait()
        if name not in self._dbs:
            path = Path(self._folder.name) / f"{name}.db"
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            self._dbs[name] = sqlite_utils.Database(conn, execute_plugins=False)
        return self._dbs[name]

    def differing(self, live: ProjectionStore) -> list[Differing]:
        """The views of `live` (a ProjectionStore, caught up) whose rows differ from the log's fold at the
        position each stands at."""
        found = []
        # The audit view first: this process folded it, so it is compared while the worker may still fold the others.
        for p in sorted(ALL, key=lambda p: p.name != "audit"):
            if p.name != "audit":
                self._wait()
            position, path = self.position, self._path(p, "")
            for attempt in range(TRIES):
                compared = compare(p, live.db(p.name), path, position)
                if isinstance(compared, dict):
                    if compared:
                        found.append(Differing(p.name, position, compared))
                    break
                if attempt + 1 == TRIES:
                    raise RuntimeError(f"view {p.name} kept moving while it was compared with the log's fold")
                position, path = compared, self._path(p, f"-{attempt}")  # the live view moved: fold to it
                self._fold((p,), position, f"-{attempt}")
        return sorted(found, key=lambda d: [p.name for p in ALL].index(d.name))

    def close(self) -> None:
        if self._worker is not None:
            self._worker.stop()
        for db in self._dbs.values():
            db.close()
        self._folder.cleanup()


def compare(p: Projection, live: sqlite_utils.Database, folded: Path, position: int) -> dict[str, int] | int:
    """Per table of `p`, how many rows of the live view (`live`) and of the fold at `folded` differ (only
    the tables that do), both at `position`; the live view's position instead when it stands elsewhere.

    One snapshot of the live file: the fold's file is attached to its connection, and each table's
    rows are matched by primary key, every column compared with IS (NULLs equal)."""
    conn = live.conn
    conn.execute("ATTACH DATABASE ? AS folded", (str(folded),))  # (a plain path: this connection takes no URIs)
    try:
        with files.snapshot(live):
            at = files.tracked(live, p.name)
            if at is None or at.position != position:
                return at.position if at else 0
            counts = {table: _differ(conn, table) for table in p.tables}
            return {table: n for table, n in counts.items() if n}
    finally:
        conn.execute("DETACH DATABASE folded")


def _differ(conn: sqlite3.Connection, table: str) -> int:
    """How many rows of `table` are not in both main (the live view) and folded, row for row; and how
    many entries of its indexes do not say what its rows say (a query that reads an index answers from it)."""
    info = conn.execute(f"PRAGMA folded.table_info({table})").fetchall()
    columns = [row[1] for row in info]
    key = [name for _, name in sorted((row[5], row[1]) for row in info if row[5])]
    fold = conn.execute(f"SELECT count(*) FROM folded.{table}").fetchone()[0]
    if _made(conn, "main", table) != _made(conn, "folded", table):
        return max(fold, 1)  # made again otherwise (another key, collation or type, or a view): not the code's table
    try:
        return _unmatched(conn, table, columns, key, fold) + _unindexed(conn, table)
    except sqlite3.OperationalError:  # the live table lost a column, or is gone: none of its rows is the fold's
        return max(fold, 1)


def _made(conn: sqlite3.Connection, schema: str, table: str) -> tuple[str, str] | None:
    """How `table` was made in `schema`: its kind (a table, or a view in its place) and its CREATE statement."""
    found = conn.execute(f"SELECT type, sql FROM {schema}.sqlite_master WHERE name = ?", (table,)).fetchone()
    return None if found is None else (found[0], found[1])


def _unindexed(conn: sqlite3.Connection, table: str) -> int:
    """How many entries of the live table's indexes and rows disagree (SQLite's check of that table alone)."""
    found = [row[0] for row in conn.execute(f"PRAGMA main.integrity_check('{table}')")]
    return 0 if found == ["ok"] else len(found)


def _unmatched(conn: sqlite3.Connection, table: str, columns: list[str], key: list[str], fold: int) -> int:
    """max(live rows, fold rows) less the fold's rows that have their equal in the live table: 0 only when
    the live table holds exactly the fold's rows. (Counted on the fold's side: a live table made again
    without its key could hold one row twice, and so stand in for one it lost.)"""
    live = conn.execute(f"SELECT count(*) FROM main.{table}").fetchone()[0]
    if key:
        on = " AND ".join(f'a."{c}" = b."{c}"' if c in key else f'a."{c}" IS b."{c}"' for c in columns)
        sql = f"SELECT count(*) FROM folded.{table} b WHERE EXISTS (SELECT 1 FROM main.{table} a WHERE {on})"
    else:  # no key: as sets
        sql = f"SELECT count(*) FROM (SELECT * FROM main.{table} INTERSECT SELECT * FROM folded.{table})"
    both = conn.execute(sql).fetchone()[0]
    return max(live, fold) - both
