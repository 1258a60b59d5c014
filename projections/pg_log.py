"""A PostgreSQL log read by a rebuild with a connection of its own, as projections.log_file reads an
SQLite one: by position range, leaving out in SQL the topics no fold wants, in binary (the stored
bytes as they are, no hex text to decode), each row made a record in one step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .log_file import Make, Row
from .records import Record
from .source import PostgresLog

CONNECT_TIMEOUT_S = 5


class PostgresLogFile:
    """Reads the events of a PostgreSQL log, read-only, outside any application."""

    def __init__(self, log: PostgresLog) -> None:
        import psycopg
        from psycopg.sql import SQL, Identifier

        self.conn = psycopg.connect(log.conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        table = SQL("{0}.{1}").format(Identifier(log.schema), Identifier(log.table))
        columns = "SELECT notification_id, originator_id::text, originator_version, topic, state FROM {0}"
        where = " WHERE notification_id > %s AND notification_id <= %s"
        self._range = SQL(columns + where + " ORDER BY notification_id").format(table)
        self._but = SQL(columns + where + " AND topic <> ALL(%s) ORDER BY notification_id").format(table)
        self._after = SQL(columns + " WHERE notification_id > %s ORDER BY notification_id LIMIT %s").format(table)
        self._head = SQL("SELECT max(notification_id) FROM {0}").format(table)
        self._first = SQL("SELECT min(notification_id) FROM {0} WHERE notification_id > %s").format(table)
        self._cursor = self.conn.cursor(binary=True)

    def rows(self, after: int, upto: int, skipped: list[str] | None = None) -> list[tuple[Any, ...]]:
        """(position, stream, version, topic, state) of the events after `after` up to `upto` whose
        topic is not in `skipped`, in position order (the stream dashed, the state bytes)."""
        params: tuple[object, ...]
        if skipped:
            sql, params = self._but, (after, upto, skipped)
        else:
            sql, params = self._range, (after, upto)
        cursor = self._cursor
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchall()

    def records(self, after: int, upto: int, wanted: Mapping[str, Make | None], skipped: list[str]) -> list[Record]:
        """As LogFile.records: made as `wanted` says, those it says None of left out."""
        made = []
        for n, o, v, t, s in self.rows(after, upto, skipped):
            make = wanted[t]
            if make is not None:
                made.append(make(n, o, v, t, s))
        return made

    def read(self, after: int, limit: int) -> list[Row]:
        """Up to `limit` events after `after`, as notifications (an EventSource's read)."""
        self._cursor.execute(self._after, (after, limit), prepare=True)
        return [Row(*r) for r in self._cursor.fetchall()]

    def head(self) -> int:
        self._cursor.execute(self._head)
        found = self._cursor.fetchone()
        return (found[0] if found else None) or 0

    def first_after(self, after: int) -> int | None:
        """The position of the first event after `after` (None: none)."""
        self._cursor.execute(self._first, (after,), prepare=True)
        found = self._cursor.fetchone()
        return found[0] if found else None

    def close(self) -> None:
        self.conn.close()
