"""A local SQLite log read by a rebuild with a connection of its own: by position range, leaving out
in SQL the topics no fold wants, each row made a record in one step (no notification objects)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import NamedTuple
from uuid import UUID

from ..domain.ids import dashed
from .records import Record, UndecodableEvent
from .source import SQLiteLog

MEMO_IDS = 5_000  # stream ids dashed and kept: a batch's events share them

# How a stored row becomes a record (records.record or record_stamped); None: no fold wants it
Make = Callable[[int, str, int, str, bytes], Record]


class Row(NamedTuple):
    """A stored event with its position, as projections decode it (records.Notification): the one type
    for the log's rows read directly, by a rebuild here or by the store's backends and recorders."""

    id: int
    originator_id: str | UUID  # the stream: dashed text read from a log's rows, a UUID from the library's
    originator_version: int
    topic: str
    state: bytes


class LogFile:
    """Reads the events of an SQLite log file, read-only, outside any application."""

    def __init__(self, log: SQLiteLog) -> None:
        uri = f"{log.path.resolve().as_uri()}?mode=ro"
        self.conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self.table = '"{}"'.format(log.table.replace('"', '""'))
        self._ids: dict[str, str] = {}
        self._statements: dict[int, str] = {}

    def records(self, after: int, upto: int, wanted: Mapping[str, Make | None], skipped: list[str]) -> list[Record]:
        """The records of the events after `after` up to `upto` whose topic is not in `skipped`,
        made as `wanted` says (left out when it says None)."""
        rows = self.conn.execute(self._select(len(skipped)), (after, upto, *skipped)).fetchall()
        ids = self._ids
        if len(ids) > MEMO_IDS:
            ids.clear()
        made = []
        for n, o, v, t, s in rows:
            make = wanted[t]
            if make is not None:
                try:
                    stream = ids.get(o) or ids.setdefault(o, dashed(o))
                except (TypeError, AttributeError) as error:  # an id edited to another type (a BLOB, a number)
                    raise UndecodableEvent(f"the event at position {n}", error) from None
                made.append(make(n, stream, v, t, s))
        return made

    def read(self, after: int, limit: int) -> list[Row]:
        """Up to `limit` events after `after`, as notifications (an EventSource's read)."""
        sql = self._select(0).replace("AND rowid <= ?", "") + " LIMIT ?"
        rows = self.conn.execute(sql, (after, limit)).fetchall()
        return [Row(n, dashed(o), v, t, s) for n, o, v, t, s in rows]

    def head(self) -> int:
        return self.conn.execute(f"SELECT max(rowid) FROM {self.table}").fetchone()[0] or 0

    def first_after(self, after: int) -> int | None:
        """The position of the first event after `after` (None: none)."""
        return self.conn.execute(f"SELECT min(rowid) FROM {self.table} WHERE rowid > ?", (after,)).fetchone()[0]

    def _select(self, skipping: int) -> str:
        found = self._statements.get(skipping)
        if found is None:
            but = f" AND topic NOT IN ({','.join('?' * skipping)})" if skipping else ""
            found = self._statements[skipping] = (
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.table}"
                f" WHERE rowid > ? AND rowid <= ?{but} ORDER BY rowid"
            )
        return found

    def close(self) -> None:
        self.conn.close()
