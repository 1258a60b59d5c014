"""The audit view: every event of the log, queryable by config, type, time, actor, correlation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import streams
from .audit_sql import AuditRow, SQLAuditFold
from .projection import Fold, Projection, StatementSink
from .records import Record
from .source import DirectLog, EventSource, PostgresLog

if TYPE_CHECKING:
    import sqlite_utils

CREATE_EVENTS = """
CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY, stream TEXT, stream_version INTEGER, type TEXT,
    config TEXT, revision INTEGER, attempt INTEGER, timestamp TEXT, actor TEXT,
    correlation_id TEXT, notification_id INTEGER, data TEXT)
"""
INDEXES = {
    name: f"CREATE INDEX IF NOT EXISTS {name} ON events ({columns})"
    for name, columns in (
        ("events_config", "config, revision, position"),
        ("events_type", "type, position"),
        ("events_actor", "actor, position"),
        ("events_timestamp", "timestamp"),
    )
}
INSERT = "INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"


class AuditView(Projection):
    name = "audit"
    # 2: data is the event's document as the log stores it (read it with records.document). 3: the deployment
    # number is `revision` in events and streams, as in the events (was `version`).
    version = 3
    tables = ("events", "streams")
    # A row holds its event's whole document (about 600 bytes): in pages 4x SQLite's default, fewer splits
    # and fewer pages to write and to sort (a rebuild of 1M events: ids, rows and indexes 11.4 s -> 9.5-10 s).
    # Not for the other views: a few rows each commit, and every table and index takes a page at least.
    page_size = 16384

    def create(self, db: sqlite_utils.Database) -> None:
        db.execute(CREATE_EVENTS)
        db.execute(streams.CREATE)
        for statement in INDEXES.values():
            db.execute(statement)

    def fold(self, conn: StatementSink) -> AuditFold:
        return AuditFold(conn)

    def fold_from_zero(
        self, db: sqlite_utils.Database, conn: StatementSink, source: EventSource, head: int, log: DirectLog
    ) -> Fold:
        """From a log a rebuild reads itself, SQLite makes the rows (see audit_sql, audit_staged)."""
        if log is None:
            return self.fold(conn)
        if isinstance(log, PostgresLog):
            from .audit_staged import (
                StagedAuditFold,  # start-up cost: rebuilds from PostgreSQL only, not on every read's import path
            )

            return StagedAuditFold(db, log, head, source, row)
        return SQLAuditFold(db, log, head, source, row)


class AuditFold(Fold):
    def __init__(self, conn: StatementSink) -> None:
        self.conn = conn
        self.where = streams.Streams(conn)

    def apply(self, records: Sequence[Record]) -> None:
        where = self.where
        known = where.known
        rows = []
        for r in records:
            if r.type in streams.FIRST:
                config, revision = where.add(r)
            else:
                config, revision = known.get(r.stream) or where.lookup(r.stream)
            rows.append(row(r, config, revision))
        where.flush()
        self.conn.executemany(INSERT, rows)

    def flush(self) -> None:
        """Nothing waits: each batch's rows are new, and were sent by `apply`."""


def row(r: Record, config: str | None, revision: int | None) -> AuditRow:
    """The audit row of `r`, an event of a stream of `config` at `revision`.

    Its data is the stored document, copied as it is: a rebuild copies it in SQL, and readers
    decode it with records.document as projections do."""
    data = r.data
    meta = data.get("meta") or {}
    return (
        r.position,
        r.stream,
        r.stream_version,
        r.type,
        config,
        data.get("revision", revision),
        data.get("attempt"),
        r.timestamp,
        meta.get("actor"),
        meta.get("correlation_id"),
        meta.get("notification_id"),
        r.text,
    )
