"""The audit view rebuilt from zero by SQLite itself, straight from a local SQLite log.

A thread of its own runs a few long statements, without the GIL, while Python folds the
other projections: the streams from their first events, then every event's row as
audit_view.row makes it (build makes the indexes once the rows are in). Python makes the
rows of events whose JSON SQLite does not read (NaN, say) once SQLite is done.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from . import streams
from .projection import Fold
from .records import KINDS, Record, decode, known_topics
from .source import EventSource, SQLiteLog
from .writer import Writer

if TYPE_CHECKING:
    import sqlite_utils

AuditRow = tuple[Any, ...]  # a row of the audit view's events table, in its columns' order
RowOf = Callable[[Record, str | None, int | None], AuditRow]
CHUNK = 100_000  # positions per statement: a failed build stops after the current one

# The two looked up for every row WITHOUT ROWID: one search of one b-tree each, not of an index and then
# the table (the rows of 1M events: 4.0-4.15 s against 4.2-4.3 s, three pairs interleaved)
TEMP = (
    "CREATE TEMP TABLE audit_topics (topic TEXT PRIMARY KEY, type TEXT) WITHOUT ROWID",
    # the log's originator ids as stored -> stream (dashed), kind, config, revision
    "CREATE TEMP TABLE audit_ids (raw TEXT PRIMARY KEY, stream TEXT, kind TEXT, config TEXT, revision INTEGER)"
    " WITHOUT ROWID",
    "CREATE TEMP TABLE audit_odd (position INTEGER PRIMARY KEY)",  # rows Python makes at the end
)
HEX = "replace(e.originator_id, '-', '')"
DASHED = "||'-'||".join(f"substr({HEX}, {a}, {n})" for a, n in ((1, 8), (9, 4), (13, 4), (17, 4), (21, 99)))
AFTER_LAST_DOT = "substr(e.topic, length(rtrim(e.topic, replace(e.topic, '.', ''))) + 1)"
TOPICS = "INSERT OR REPLACE INTO temp.audit_topics VALUES (?, ?)"
FIRST_SQL = {
    "Registered": "e.topic GLOB '*.Registered' OR e.topic = 'Registered'",
    "Created": "e.topic GLOB '*.Created' OR e.topic = 'Created'",
}


def _truthy(path: str) -> str:
    """Python's truth of a JSON value (None, False, 0, "", [] and {} are false)."""
    value = f"json_extract(e.state, '{path}')"
    return f"""CASE json_type(e.state, '{path}') WHEN 'true' THEN 1 WHEN 'integer' THEN {value} != 0
        WHEN 'real' THEN {value} != 0 WHEN 'text' THEN {value} != '' WHEN 'array' THEN {value} != '[]'
        WHEN 'object' THEN {value} != '{{}}' ELSE 0 END"""


_CLASS = f"""CASE WHEN {FIRST_SQL["Registered"]} THEN substr(e.topic, 1, length(e.topic) - 11)
    ELSE substr(e.topic, 1, length(e.topic) - 8) END"""
_KIND = "CASE {0} {1} ELSE {0} END".format(_CLASS, " ".join(f"WHEN '{c}' THEN '{k}'" for c, k in KINDS.items()))
# streams.Streams.add: the stream's kind, and (name or config, revision) of its first event, in log order
IDS = f"""INSERT OR REPLACE INTO temp.audit_ids
SELECT e.originator_id, {DASHED}, {_KIND},
    CASE WHEN {_truthy("$.name")} THEN json_extract(e.state, '$.name') ELSE json_extract(e.state, '$.config') END,
    json_extract(e.state, '$.revision')
FROM {{log}} AS e
WHERE e.rowid > ? AND e.rowid <= ? AND ({FIRST_SQL["Registered"]} OR {FIRST_SQL["Created"]}) AND json_valid(e.state)
ORDER BY e.rowid"""
STREAMS = "INSERT OR REPLACE INTO main.streams SELECT stream, kind, config, revision FROM temp.audit_ids"
ROWS = f"""
INSERT OR IGNORE INTO main.events
SELECT e.rowid, coalesce(m.stream, {DASHED}), e.originator_version, coalesce(t.type, {AFTER_LAST_DOT}), m.config,
       coalesce(json_extract(e.state, '$.revision'),
                CASE WHEN json_type(e.state, '$.revision') IS NULL THEN m.revision END),
       json_extract(e.state, '$.attempt'), json_extract(e.state, '$.timestamp._data_'),
       json_extract(e.state, '$.meta.actor'), json_extract(e.state, '$.meta.correlation_id'),
       json_extract(e.state, '$.meta.notification_id'), CAST(e.state AS TEXT)
FROM {{log}} AS e
LEFT JOIN temp.audit_ids AS m ON m.raw = e.originator_id
LEFT JOIN temp.audit_topics AS t ON t.topic = e.topic
WHERE e.rowid > ? AND e.rowid <= ? AND json_valid(e.state)"""
# JSON that SQLite does not read: no row
ODD = """INSERT OR IGNORE INTO temp.audit_odd SELECT e.rowid FROM {log} AS e WHERE e.rowid > ? AND e.rowid <= ?
    AND NOT EXISTS (SELECT 1 FROM main.events WHERE position = e.rowid)"""
REPLACE = "INSERT OR REPLACE INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"


class Unreadable(Exception):
    """A stream's first event is JSON that SQLite does not read: this log's audit is Python's to fold."""


class SQLAuditFold(Fold):
    """Wants no record: SQLite reads the log itself, from the first `reached` on, in its own thread."""

    def __init__(self, db: sqlite_utils.Database, log: SQLiteLog, head: int, source: EventSource, row: RowOf) -> None:
        """Attaches the log to `db` read-only (outside any transaction)."""
        db.execute("ATTACH DATABASE ? AS rollouts_log", (f"{log.path.resolve().as_uri()}?mode=ro",))
        self._setup(db, 'rollouts_log."{}"'.format(log.table.replace('"', '""')), head, source, row)

    def _setup(self, db: sqlite_utils.Database, table: str, head: int, source: EventSource, row: RowOf) -> None:
        """Reading the log's rows from `table` (columns rowid, originator_id, originator_version, topic, state)."""
        for statement in TEMP:
            db.execute(statement)
        self.ids, self.rows, self.odd = (s.replace("{log}", table) for s in (IDS, ROWS, ODD))
        self.db = db
        self.head = head
        self.source = source
        self.row = row
        self.writer = Writer()
        self.sink = self.writer.sink(db.conn)
        self.started = False
        self.done = 0  # rows queued up to this position
        self.last = 0
        self.finished = False

    reads_itself = True

    def wants(self, kind: str, type_: str) -> bool:
        return False

    def apply(self, records: Sequence[Record]) -> None:
        pass

    def reached(self, position: int) -> None:
        self.last = position
        self._start()

    def _start(self) -> None:
        """Queue everything up to the head (inside the build's transaction, after a batch)."""
        if self.started:
            return
        self.started = True
        self.writer.start()
        # The topics read so far (a row of another looks its type up in SQL, slower)
        self.sink.executemany(TOPICS, [(topic, type_) for topic, (_, type_) in known_topics().items()])
        self._queue(self.head)

    def _queue(self, upto: int) -> None:
        self.sink.executemany(self.ids, [(self.done, upto)])
        self.sink.executemany(STREAMS, [()])
        start = self.done
        while start < upto:
            # A gap in the positions is stepped over, not walked a chunk at a time: a log whose rows were
            # renumbered by hand (one at position 2**63 - 1) kept `audit` and `events` busy for hours.
            following = self.source.read(start, 1)
            if not following or following[0].id > upto:
                break
            start = following[0].id - 1
            end = min(start + CHUNK, upto)
            self.writer.call(self.db.conn, partial(self._rows, start, end))
            start = end
        self.done = max(self.done, upto)

    def _rows(self, start: int, end: int, conn: sqlite3.Connection) -> None:
        """(In the writer's thread.) The rows of events start+1..end; those left out are looked for
        only when there are fewer rows than positions (the log's ids have no gaps)."""
        if conn.execute(self.rows, (start, end)).rowcount < end - start:
            conn.execute(self.odd, (start, end))

    def flush(self) -> None:
        """Nothing waits: SQLite writes as it reads."""

    def finish(self) -> None:
        """The events past the head, if the build read any; then Python's rows."""
        self._start()
        if self.last > self.done:
            self._queue(self.last)
        self._python_rows()

    def _python_rows(self) -> None:
        """The rows of the events whose JSON SQLite did not read, made by Python; then wait for all."""
        odd = [p for (p,) in self.sink.execute("SELECT position FROM temp.audit_odd ORDER BY position")]
        rows = [self._python_row(p) for p in odd]  # the writer is idle: nothing was queued since
        self.sink.executemany(REPLACE, rows)
        self.writer.wait()
        self.finished = True

    def _python_row(self, position: int) -> AuditRow:
        (r,) = [decode(n) for n in self.source.read(position - 1, 1)]
        where = self.db.execute(streams.SELECT, (r.stream,)).fetchone()
        if where is None and r.type in streams.FIRST:
            raise Unreadable(f"event {position} starts stream {r.stream}")
        return self.row(r, *(where or (None, None)))

    def close(self) -> None:
        if not self.finished:
            self.db.conn.interrupt()  # a failed build need not wait for an index of a million rows
        self.writer.stop(abandon=True)
