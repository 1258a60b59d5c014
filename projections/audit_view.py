"""The audit view: every event of the log, queryable by config, type, time, actor, correlation."""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlite_utils

from projections import streams
from projections.projection import Projection
from projections.records import Record

CREATE_EVENTS = """
CREATE TABLE IF NOT EXISTS events (
    position INTEGER PRIMARY KEY, stream TEXT, stream_version INTEGER, type TEXT,
    config TEXT, version INTEGER, attempt INTEGER, timestamp TEXT, actor TEXT,
    correlation_id TEXT, notification_id INTEGER, data TEXT)
"""
INDEXES = (
    "CREATE INDEX IF NOT EXISTS events_config ON events (config, version, position)",
    "CREATE INDEX IF NOT EXISTS events_type ON events (type, position)",
    "CREATE INDEX IF NOT EXISTS events_actor ON events (actor, position)",
    "CREATE INDEX IF NOT EXISTS events_correlation ON events (correlation_id)",
    "CREATE INDEX IF NOT EXISTS events_timestamp ON events (timestamp)",
)
INSERT = "INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"


class AuditView(Projection):
    name = "audit"
    version = 1
    tables = ("events", "streams")

    def create(self, db: sqlite_utils.Database) -> None:
        db.execute(CREATE_EVENTS)
        db.execute(streams.CREATE)
        for statement in INDEXES:
            db.execute(statement)

    def apply(self, db: sqlite_utils.Database, records: Sequence[Record]) -> None:
        where = streams.Streams(db)
        rows = []
        for r in records:
            config, version = where.locate(r)
            meta = r.meta
            rows.append(
                (
                    r.position,
                    r.stream,
                    r.stream_version,
                    r.type,
                    config,
                    r.data.get("revision", version),
                    r.data.get("attempt"),
                    r.timestamp,
                    meta.get("actor"),
                    meta.get("correlation_id"),
                    meta.get("notification_id"),
                    json.dumps(r.data, separators=(",", ":")),
                )
            )
        db.conn.executemany(INSERT, rows)
