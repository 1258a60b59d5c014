"""Which config (and revision) each stream belongs to, learned from its first event."""

from __future__ import annotations

from .projection import CACHE_ROWS, StatementSink
from .records import Record

CREATE = "CREATE TABLE IF NOT EXISTS streams (stream TEXT PRIMARY KEY, kind TEXT, config TEXT, revision INTEGER)"
INSERT = "INSERT OR REPLACE INTO streams (stream, kind, config, revision) VALUES (?, ?, ?, ?)"
SELECT = "SELECT config, revision FROM streams WHERE stream = ?"
FIRST = frozenset({"Registered", "Created"})
Where = tuple[str | None, int | None]


class Streams:
    """A cache over the `streams` table of one projection file; new streams are written by `flush`."""

    def __init__(self, conn: StatementSink) -> None:
        self.conn = conn
        self.known: dict[str, Where] = {}
        self.new: list[tuple[str, str, str | None, int | None]] = []

    def add(self, record: Record) -> Where:
        """The stream that `record` (its first event) creates."""
        data = record.data
        found = (data.get("name") or data.get("config"), data.get("revision"))
        self.new.append((record.stream, record.kind, *found))
        self.known[record.stream] = found
        return found

    def lookup(self, stream: str) -> Where:
        row = self.conn.execute(SELECT, (stream,)).fetchone()
        self.known[stream] = found = (row[0], row[1]) if row else (None, None)
        return found

    def flush(self) -> None:
        """Write the streams created since the last flush; forget all once more than CACHE_ROWS are known."""
        if self.new:
            self.conn.executemany(INSERT, self.new)
            self.new = []
        if len(self.known) > CACHE_ROWS:
            self.known.clear()
