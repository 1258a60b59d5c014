"""The audit view rebuilt from zero from a PostgreSQL log, by SQLite, as from a local one (audit_sql).

SQLite cannot attach a PostgreSQL table; so each batch of the log's rows is copied as it is (the
stored bytes, no decoding) into a staging table of the view's file, and the writer's thread runs
audit_sql's statements on it, without the GIL, while the next batch is read. Python decodes
nothing here but the events whose JSON SQLite does not read.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from .audit_sql import STREAMS, TOPICS, RowOf, SQLAuditFold
from .pg_log import PostgresLogFile
from .records import topic_parts
from .source import EventSource, PostgresLog

if TYPE_CHECKING:
    import sqlite_utils

STAGING = (
    "CREATE TEMP TABLE audit_log "
    "(rowid INTEGER PRIMARY KEY, originator_id TEXT, originator_version INTEGER, topic TEXT, state BLOB)"
)
STAGE = "INSERT INTO temp.audit_log VALUES (?, ?, ?, ?, ?)"
UNSTAGE = "DELETE FROM temp.audit_log"


class StagedAuditFold(SQLAuditFold):
    """Wants no record: at each position reached, reads the log's rows up to it from PostgreSQL itself."""

    def __init__(
        self,
        db: sqlite_utils.Database,
        log: PostgresLog,
        head: int,
        source: EventSource,
        row: RowOf,
    ) -> None:
        db.execute(STAGING)
        self._setup(db, "temp.audit_log", head, source, row)
        self.reader = PostgresLogFile(log)
        self.topics: set[str] = set()

    def reached(self, position: int) -> None:
        self.last = position
        self._begin()
        self._stage(position)

    def _begin(self) -> None:
        if not self.started:
            self.started = True
            self.writer.start()

    def _stage(self, upto: int) -> None:
        """Copy the rows after the last copied up to `upto`, and queue their audit rows."""
        if upto <= self.done:
            return
        rows = self.reader.rows(self.done, upto)
        new = {r[3] for r in rows} - self.topics
        if new:  # a row of a topic not listed looks its type up in SQL, slower
            self.topics |= new
            self.sink.executemany(TOPICS, [(topic, topic_parts(topic)[1]) for topic in sorted(new)])
        self.sink.executemany(STAGE, rows)
        self.sink.executemany(self.ids, [(self.done, upto)])
        self.writer.call(self.db.conn, partial(self._rows, self.done, upto))
        self.sink.executemany(UNSTAGE, [()])
        self.done = upto

    def finish(self) -> None:
        """The rows to the head (and past it, if the build read further), the streams; then Python's rows."""
        self._begin()
        self._stage(max(self.head, self.last))
        self.sink.executemany(STREAMS, [()])
        self._python_rows()

    def close(self) -> None:
        super().close()
        self.reader.close()
