"""`projections diff`: a live view against the same view rebuilt from zero, at the same position.

After a bug in a fold, the live rows say what the bug made them say; a rebuild says what the fixed
code makes of the log. The rebuild goes into a scratch folder, bounded to the position the live
view stands at, so the two are comparable and the live rows are never touched.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .projection import Projection
from .records import Notification
from .source import EventSource, LocalLog, PostgresLog, ServerLog, SQLiteLog


class Bounded:
    """An event source cut at `until`: what a view at that position was folded from."""

    def __init__(self, source: EventSource, until: int) -> None:
        self.source = source
        self.until = until

    def head(self) -> int:
        return min(self.until, self.source.head())

    def read(self, after: int, limit: int) -> Sequence[Notification]:
        if after >= self.until:
            return []
        return [n for n in self.source.read(after, limit) if n.id <= self.until]

    def identity(self) -> str:
        return self.source.identity()

    def sqlite_log(self) -> SQLiteLog | None:
        return self.source.sqlite_log() if isinstance(self.source, LocalLog) else None

    def postgres_log(self) -> PostgresLog | None:
        return self.source.postgres_log() if isinstance(self.source, ServerLog) else None


@dataclass(frozen=True)
class Difference:
    projection: str
    table: str
    key: object  # a row's key: one column's value, or a tuple of them
    live: dict[str, Any] | None
    rebuilt: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "projection": self.projection,
            "table": self.table,
            "key": self.key,
            "live": self.live,
            "rebuilt": self.rebuilt,
        }


def differences(projection: Projection, live: sqlite3.Connection, rebuilt: sqlite3.Connection) -> Iterator[Difference]:
    """Rows of each of the view's tables that differ, are missing or are extra, in key order."""
    for table in projection.tables:
        key = _key(rebuilt, table)  # the code's key: a live table may have been made again without its own
        order = ", ".join(key)
        mine = _rows(live, f"SELECT * FROM {table} ORDER BY {order}")
        theirs = _rows(rebuilt, f"SELECT * FROM {table} ORDER BY {order}")
        a, b = next(mine, None), next(theirs, None)
        while a is not None or b is not None:
            ka = None if a is None else tuple(a[k] for k in key)
            kb = None if b is None else tuple(b[k] for k in key)
            if kb is None or (ka is not None and _before(ka, kb)):
                yield Difference(projection.name, table, _one(ka), a, None)
                a = next(mine, None)
            elif ka is None or _before(kb, ka):
                yield Difference(projection.name, table, _one(kb), None, b)
                b = next(theirs, None)
            else:
                if a != b:
                    yield Difference(projection.name, table, _one(ka), a, b)
                a, b = next(mine, None), next(theirs, None)


def _key(conn: sqlite3.Connection, table: str) -> list[str]:
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    primary = sorted((row[5], row[1]) for row in info if row[5])
    return [name for _, name in primary] or ["rowid"]


def _rows(conn: sqlite3.Connection, sql: str) -> Iterator[dict[str, Any]]:
    cursor = conn.execute(sql)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


def _before(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """SQLite's order of two keys (NULLs first; numbers before text), as ORDER BY sorted them."""
    return [(v is not None, isinstance(v, str), v) for v in a] < [(v is not None, isinstance(v, str), v) for v in b]


def _one(key: tuple[Any, ...] | None) -> object:
    return key[0] if key is not None and len(key) == 1 else key
