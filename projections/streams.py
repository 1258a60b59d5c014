"""Which config (and revision) each stream belongs to, learned from its first event."""

from __future__ import annotations

import sqlite_utils

from projections.records import Record

CREATE = "CREATE TABLE IF NOT EXISTS streams (stream TEXT PRIMARY KEY, kind TEXT, config TEXT, version INTEGER)"
INSERT = "INSERT OR REPLACE INTO streams (stream, kind, config, version) VALUES (?, ?, ?, ?)"
SELECT = "SELECT config, version FROM streams WHERE stream = ?"


class Streams:
    """A per-batch cache over the `streams` table of one projection file."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        self.known: dict[str, tuple[str | None, int | None]] = {}

    def locate(self, record: Record) -> tuple[str | None, int | None]:
        """(config, version) of `record`, remembering streams as they are created."""
        if record.type in ("Registered", "Created"):
            found = (record.data.get("name") or record.data.get("config"), record.data.get("revision"))
            self.db.execute(INSERT, (record.stream, record.kind, *found))
            self.known[record.stream] = found
            return found
        if record.stream not in self.known:
            row = self.db.execute(SELECT, (record.stream,)).fetchone()
            self.known[record.stream] = (row[0], row[1]) if row else (None, None)
        return self.known[record.stream]
