"""The event log as projections read it, through the application's recorder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from eventsourcing.sqlite import SQLiteApplicationRecorder

from projections.source import PostgresLog, SQLiteLog

MEMO_IDS = 5_000  # a rebuild's batch shares them; a long-lived reader must not keep every id


class Row(NamedTuple):
    """A notification as projections need it; the originator id stays a string."""

    id: int
    originator_id: str
    originator_version: int
    topic: str
    state: bytes


def _dashed(hex_id: str) -> str:
    """The library stores UUIDs as 32 hex digits; projections use the usual dashed form."""
    h = hex_id.replace("-", "")
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


class RecorderSource:
    """EventSource over an eventsourcing ApplicationRecorder (SQLite or PostgreSQL)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self._ids: dict[str, str] = {}  # stored id -> dashed: a stream's events share one string
        self._pg_select: Any = None

    def head(self) -> int:
        return self.recorder.max_notification_id() or 0

    def read(self, after: int, limit: int) -> Sequence[Any]:
        if isinstance(self.recorder, SQLiteApplicationRecorder):
            return self._read_sqlite(after, limit)
        if getattr(getattr(self.recorder, "datastore", None), "schema", None) is not None:  # PostgreSQL
            return self._read_postgres(after, limit)
        return self.recorder.select_notifications(start=after, limit=limit, inclusive_of_start=False)

    def _read_postgres(self, after: int, limit: int) -> Sequence[Any]:
        """The same rows select_notifications gives, as tuples, the ids as text (no UUID objects)."""
        from psycopg.rows import tuple_row
        from psycopg.sql import SQL, Identifier

        if self._pg_select is None:
            self._pg_select = (
                SQL(
                    "SELECT notification_id, originator_id::text, originator_version, topic, state FROM {0}.{1}"
                    " WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
                )
                .format(Identifier(self.recorder.datastore.schema), Identifier(self.recorder.events_table_name))
                .as_string(None)
            )  # rendered once: psycopg renders a composed statement at every execute
        # Binary: the stored bytes as they are (as text, each would come as hex digits to decode)
        with self.recorder.datastore.get_connection() as conn, conn.cursor(row_factory=tuple_row, binary=True) as curs:
            curs.execute(self._pg_select, (after, limit), prepare=True)
            rows = curs.fetchall()
        new = tuple.__new__
        return [new(Row, (n, o, v, t, s if isinstance(s, bytes) else bytes(s))) for n, o, v, t, s in rows]

    def _read_sqlite(self, after: int, limit: int) -> Sequence[Any]:
        """The same rows select_notifications gives, without building a UUID per row."""
        sql = (
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.recorder.events_table_name}"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        with self.recorder.datastore.transaction(commit=False) as c:
            c.execute(sql, (after, limit))
            rows = c.fetchall()
        ids = self._ids
        if len(ids) > MEMO_IDS:
            ids.clear()
        new = tuple.__new__
        return [new(Row, (n, ids.get(o) or ids.setdefault(o, _dashed(o)), v, t, s)) for n, o, v, t, s in rows]

    def sqlite_log(self) -> SQLiteLog | None:
        """The log's SQLite file, for projections to read with SQLite itself (not when in memory)."""
        if not isinstance(self.recorder, SQLiteApplicationRecorder):
            return None
        pool = self.recorder.datastore.pool
        if pool.is_sqlite_memory_mode or str(pool.db_name).startswith("file:"):
            return None
        return SQLiteLog(Path(pool.db_name), self.recorder.events_table_name)

    def postgres_log(self) -> PostgresLog | None:
        """Where the PostgreSQL log is, for a rebuild to read it with connections of its own."""
        datastore = getattr(self.recorder, "datastore", None)
        schema = getattr(datastore, "schema", None)
        if schema is None:
            return None
        from psycopg.conninfo import make_conninfo

        pool = datastore.pool  # type: ignore[union-attr]
        settings = {k: v for k, v in pool.kwargs.items() if k != "row_factory" and v is not None}
        return PostgresLog(make_conninfo(pool.conninfo, **settings), schema, self.recorder.events_table_name)

    def identity(self) -> str:
        first = self.recorder.select_notifications(start=None, limit=1)
        if not first:
            return ""
        n = first[0]
        return hashlib.sha256(f"{n.originator_id}:{n.originator_version}:".encode() + n.state).hexdigest()[:16]
