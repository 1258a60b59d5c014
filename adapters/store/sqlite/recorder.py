"""The SQLite recorder, chained as adapters/store/log_recorder.py describes: events, hashes and the log's id in
one file, read and watched as a file."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore
from eventsourcing.utils import register_topic

from ....domain.ids import dashed, seal_id
from ....projections.records import UndecodableEvent
from ....projections.source import DirectLog, SQLiteLog
from ...sql_lists import chunks, marks, padded, shape
from .. import chain
from ..failures import missing_table, not_utf8
from ..log_recorder import (
    CLAIM_TOPIC,
    Guards,
    HeadMoved,
    LogSealed,
    StoreNotEmpty,
    chained,
    chained_part,
    check_guards,
    first_value,
)
from ..opening import LOG_COLUMNS, ChainedLog, identity, new_format
from ..port import CHAIN_TABLE, LOG_TABLE, EventRow, HashedRow, Imported, Listener, Part, Row, SnapshotTable, Tail
from . import factory
from .walk import PARALLEL_FROM, cut, sqlite_hashed, sqlite_walk

SNAPSHOTS = "stored_snapshots"  # the library's table of aggregate snapshots in a SQLite log
WANTED_MOST = 256  # streams in one events_after statement (rows of VALUES: SQLite's compound limit is 500)
MEMO_IDS = 5_000  # a rebuild's batch shares them; a long-lived reader must not keep every id


class ChainedSQLiteRecorder(SQLiteApplicationRecorder, ChainedLog):
    """SQLite: events, their hashes and the log's id in one file."""

    datastore: SQLiteDatastore
    _log_id: str | None = None  # the store's log id, read at its first save (fixed once made)
    _format: int = chain.LEGACY  # its chain format, read with its id
    synchronous: str | None = None  # PRAGMA synchronous for this recorder's saves (None: SQLite's default)

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (position INTEGER PRIMARY KEY, hash TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {LOG_TABLE} (log_id TEXT NOT NULL, created_at TEXT NOT NULL, chain INTEGER)",
        ]

    def create_table(self) -> None:
        super().create_table()
        if self.log_id() is None:
            with self.datastore.transaction(commit=True) as c:
                c.execute(f"SELECT 1 FROM {self.events_table_name} LIMIT 1")
                made = (uuid.uuid4().hex, new_format(c.fetchone() is None))
                c.execute(f"INSERT INTO {LOG_TABLE} ({LOG_COLUMNS}) VALUES (?, datetime('now'), ?)", made)

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,  # why: the library's signature (guards, head)
    ) -> Sequence[int] | None:
        if self.synchronous is None:
            return super().insert_events(stored_events, **kwargs)
        with self.datastore.get_connection(commit=True) as conn:
            # Per connection, and refused inside a transaction: so on the writer's connection, before BEGIN.
            conn.cursor().execute(f"PRAGMA synchronous={self.synchronous}")
            with conn.transaction(commit=True) as c:
                return self._insert_events(c, stored_events, **kwargs)

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        **kwargs: Any,  # why: the library's signature
    ) -> Sequence[int] | None:
        ids = super()._insert_events(c, stored_events, **kwargs)
        if ids:
            self._fence(c, ids[0], kwargs.get("head"))
            self._chain(c, ids, stored_events, self._format)
        self._guard(c, kwargs.get("guards") or ())
        return ids

    def _fence(self, c: SQLiteCursor, first: int, head: int | None) -> None:
        """After the insert (which holds the write lock): the log is not sealed before these events, and,
        given `head`, it still ended there (a seal's decision read the whole log)."""
        if self._log_id is None:  # fixed once made: read once (with the chain format)
            c.execute(f"SELECT * FROM {LOG_TABLE} LIMIT 1")
            self._log_id, self._format = identity(c.fetchone())
        if (log_id := self._log_id) is not None:
            sql = f"SELECT rowid FROM {self.events_table_name} WHERE originator_id = ? AND rowid < ? LIMIT 1"
            c.execute(sql, (seal_id(log_id).hex, first))
            if (sealed := c.fetchone()) is not None:
                raise LogSealed(log_id, sealed[0])
        if head is not None:
            c.execute(f"SELECT coalesce(max(rowid), 0) FROM {self.events_table_name} WHERE rowid < ?", (first,))
            if (now := c.fetchone()[0]) != head:
                raise HeadMoved(f"the log went on from position {head} to {now} meanwhile")

    def sealed(self) -> int | None:
        """The position of this log's seal (None: not sealed)."""
        log_id = self._log_id or self.log_id()
        if log_id is None:
            return None
        sql = f"SELECT rowid FROM {self.events_table_name} WHERE originator_id = ? LIMIT 1"
        return first_value(self._query(sql, (seal_id(log_id).hex,)))

    def _guard(self, c: SQLiteCursor, guards: Guards) -> None:
        """After the insert (which holds the write lock): the guarded streams are as the decision read them."""
        found = []
        for stream, _ in guards:
            sql = f"SELECT max(originator_version) FROM {self.events_table_name} WHERE originator_id = ?"
            c.execute(sql, (stream.hex,))
            found.append((stream, c.fetchone()[0]))
        check_guards(found, guards)

    def _chain(self, c: SQLiteCursor, ids: Sequence[int], stored_events: Sequence[StoredEvent], fmt: int) -> None:
        def gap(after: int, first: int) -> list[Any]:  # why: sqlite3's rows
            sql = f"SELECT rowid, * FROM {self.events_table_name} WHERE rowid > ? AND rowid < ? ORDER BY rowid"
            c.execute(sql, (after, first))
            return list(c.fetchall())

        c.execute(f"SELECT position, hash FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1")
        last = c.fetchone()
        rows = chained(last and (last[0], last[1]), ids, stored_events, fmt, gap)
        c.executemany(f"INSERT INTO {CHAIN_TABLE} (position, hash) VALUES (?, ?)", rows)

    def import_events(self, batches: Iterable[Sequence[Imported]], tail: Tail, fmt: int) -> int:
        """Insert every batch at its positions, chaining what was chained, then the events `tail` returns (given a
        reader of streams in the transaction), in ONE transaction on an empty store: an exception from `batches` or
        `tail` leaves it as it was. It keeps its own log id and takes the log's chain format `fmt` (and positions)."""
        count = 0
        insert = (
            f"INSERT INTO {self.events_table_name} (rowid, originator_id, originator_version, topic, state)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"SELECT max(rowid) FROM {self.events_table_name}")
            if head := c.fetchone()[0]:
                raise StoreNotEmpty(head)
            c.execute(f"UPDATE {LOG_TABLE} SET chain = ?", (fmt,))  # (no save before: the id is not read yet)
            last = 0
            for batch in batches:
                c.executemany(insert, [_row(p, e) for p, e, _ in batch])
                ids, events = chained_part(batch)
                if ids:
                    self._chain(c, ids, events, fmt)
                count += len(batch)
                last = batch[-1].position if batch else last

            def read(streams: Sequence[UUID]) -> list[StoredEvent]:
                marks = ",".join("?" * len(streams))
                c.execute(
                    f"SELECT originator_id, originator_version, topic, state FROM {self.events_table_name}"
                    f" WHERE originator_id IN ({marks}) ORDER BY rowid",
                    [s.hex for s in streams],
                )
                return [StoredEvent(UUID(r[0]), r[1], r[2], r[3]) for r in c.fetchall()]

            added = tail(read) if count else []
            if added:
                ids = list(range(last + 1, last + 1 + len(added)))
                c.executemany(insert, [_row(p, e) for p, e in zip(ids, added, strict=True)])
                self._chain(c, ids, added, fmt)
        return count

    def log_id(self) -> str | None:
        return first_value(self._query(f"SELECT log_id FROM {LOG_TABLE} LIMIT 1", ()))

    def session_user(self) -> str | None:
        """A file has no database roles: its events record no db_user."""
        return None

    def take_log_id(self, log_id: str) -> None:
        """Name the log anew (a rebind onto an older copy: its next positions are not the old log's)."""
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"UPDATE {LOG_TABLE} SET log_id = ?", (log_id,))
        self._log_id = None

    def chained_rows(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]:
        """Every event (positions lo..hi) in position order with its stored hash (None when it has none),
        and each hash whose event is gone as a row with no stream: two ordered scans of one snapshot, merged."""
        return sqlite_walk(str(self.datastore.pool.db_name), self.events_table_name, lo, hi)

    def hashed_events(self, lo: int = 0, hi: int | None = None) -> Iterator[HashedRow]:
        """Every event (positions lo..hi) in position order with its stored hash (None when it has none)."""
        return sqlite_hashed(str(self.datastore.pool.db_name), self.events_table_name, lo, hi)

    def file_and_table(self) -> tuple[str, str] | None:
        """Where the log is, for a process of its own reading a part of it (sqlite_hashed)."""
        return str(self.datastore.pool.db_name), self.events_table_name

    def parts(self, count: int, smallest: int = PARALLEL_FROM) -> list[Part] | None:
        """The log cut into `count` consecutive parts that can be walked apart, or None (walk.cut)."""
        db, table = str(self.datastore.pool.db_name), self.events_table_name
        return cut(self._query, db, table, count, smallest, self.chain_format())

    def events_of(self, streams: Sequence[UUID], until: int) -> list[EventRow]:
        """The events of `streams` at or before position `until` (an index lookup per stream)."""
        found: list[EventRow] = []
        for chunk in chunks([s.hex for s in streams]):
            ids = padded(chunk)
            sql = (
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name}"
                f" WHERE originator_id IN ({marks(len(ids))}) AND rowid <= ?"
            )
            found += [EventRow(*r) for r in self._query(sql, (*ids, until))]
        return found

    def events_after(
        self, wanted: Sequence[tuple[UUID, int | None]], snapshots: SnapshotTable | None
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """As the PostgreSQL recorder's: the events of each stream after the version given, or, given
        None, the stream's last snapshot (in the table of recorder `snapshots`, in this file) and the
        events after it; one statement per WANTED_MOST streams, not one (and a transaction) per stream."""
        if snapshots is not None and snapshots.datastore is not self.datastore:
            raise ValueError("the snapshots are not in this log's file")  # the library's factory puts them there
        if len(wanted) == 1:
            return self._events_after_one(*wanted[0], None if snapshots is None else snapshots.events_table_name)
        events: list[StoredEvent] = []
        found: list[StoredEvent] = []
        for chunk in chunks(wanted, WANTED_MOST):
            # (rows of no stream fill `w` to its shape: a NULL id joins nothing)
            rows = shape(len(chunk))
            sql = self._events_after_sql(rows, None if snapshots is None else snapshots.events_table_name)
            params = [p for stream, version in chunk for p in (stream.hex, version)]
            params += [None, None] * (rows - len(chunk))
            with self.datastore.transaction(commit=False) as c:  # a missing table is an error here, not "none"
                c.execute(sql, params)
                rows = c.fetchall()
            for snapshot, stream, version, topic, state in rows:
                (found if snapshot else events).append(StoredEvent(UUID(str(stream)), version, topic, state))
        return events, found

    def _events_after_one(
        self, stream: UUID, version: int | None, snapshots: str | None
    ) -> tuple[list[StoredEvent], list[StoredEvent]]:
        """events_after of one stream (a command's load): the library's two statements, its last snapshot and
        the events after it, in one read transaction; on a local file the union of many streams' statement
        costs more to run than the two (~85 against ~45 us)."""
        columns = "originator_id, originator_version, topic, state"
        with self.datastore.transaction(commit=False) as c:  # a missing table is an error here, not "none"
            found = []
            if version is None and snapshots is not None:
                c.execute(
                    f"SELECT {columns} FROM {snapshots} WHERE originator_id = ? ORDER BY originator_version DESC"
                    " LIMIT 1",
                    (stream.hex,),
                )
                found = [StoredEvent(stream, r[1], r[2], r[3]) for r in c.fetchall()]
            after = found[0].originator_version if found else version
            c.execute(
                f"SELECT {columns} FROM {self.events_table_name} WHERE originator_id = ? AND originator_version > ?"
                " ORDER BY originator_version",
                (stream.hex, after or 0),
            )
            events = [StoredEvent(stream, r[1], r[2], r[3]) for r in c.fetchall()]
        return events, found

    def _events_after_sql(self, streams: int, snapshots: str | None) -> str:
        # The last snapshot of each stream asked with no version (SQLite: the bare columns of the max() row).
        latest = (
            "SELECT NULL AS originator_id, 0 AS originator_version, NULL AS topic, NULL AS state WHERE 0"
            if snapshots is None
            else "SELECT s.originator_id, MAX(s.originator_version) AS originator_version, s.topic, s.state"
            f" FROM {snapshots} s JOIN w ON s.originator_id = w.id AND w.gt IS NULL GROUP BY s.originator_id"
        )
        return (
            f"WITH w (id, gt) AS (VALUES {','.join(['(?, ?)'] * streams)}), s AS ({latest})"
            " SELECT 1, originator_id, originator_version, topic, state FROM s UNION ALL"
            f" SELECT 0, e.originator_id, e.originator_version, e.topic, e.state FROM w JOIN {self.events_table_name} e"
            " ON e.originator_id = w.id AND e.originator_version >"
            " coalesce(w.gt, (SELECT s.originator_version FROM s WHERE s.originator_id = w.id), 0)"
        )

    def hash_at(self, position: int) -> str | None:
        try:
            return first_value(self._query(f"SELECT hash FROM {CHAIN_TABLE} WHERE position = ?", (position,)))
        except Exception as error:
            if not_utf8(error) is None:
                raise
        # A hash edited to text that is not UTF-8 is no hash this program wrote: shown with its bytes replaced
        # (never equal to a hash), so that the home's check says the log no longer holds the head it has seen.
        raw = first_value(self._query(f"SELECT CAST(hash AS BLOB) FROM {CHAIN_TABLE} WHERE position = ?", (position,)))
        return raw.decode(errors="replace")

    def snapshot_rows(self) -> list[tuple[Any, ...]]:
        """Every stored snapshot (stream, version, topic, state) with the position of its stream's event at
        that version (None: there is none), by stream and version; none when the log has no snapshots
        table (this version takes no snapshots; earlier ones did)."""
        sql = (
            f"SELECT s.originator_id, s.originator_version, s.topic, s.state, e.rowid FROM {SNAPSHOTS} s"
            f" LEFT JOIN {self.events_table_name} e ON e.originator_id = s.originator_id"
            " AND e.originator_version = s.originator_version ORDER BY s.originator_id, s.originator_version"
        )
        return [tuple(row) for row in self._query(sql, ())]

    def claim_of(self, stream: UUID) -> tuple[int, str | None] | None:
        """Position and hash of the stream's latest DeployerClaimed event (the claim its deployer runs for)."""
        sql = (
            f"SELECT e.rowid, h.hash FROM {self.events_table_name} e LEFT JOIN {CHAIN_TABLE} h ON h.position = e.rowid"
            f" WHERE e.originator_id = ? AND e.topic LIKE ? ORDER BY e.originator_version DESC LIMIT 1"
        )
        rows = self._query(sql, (stream.hex, CLAIM_TOPIC))
        return (rows[0][0], rows[0][1]) if rows else None

    def claims_of(self, streams: Sequence[UUID]) -> dict[UUID, tuple[int, str | None]]:
        """claim_of for each of `streams`, in one query per 500 (those with no claim left out): a pass's
        creates read their claims at once, not one statement (and one transaction) each."""
        found: dict[UUID, tuple[int, str | None]] = {}
        unique = [s.hex for s in dict.fromkeys(streams)]
        for chunk in chunks(unique):
            ids = padded(chunk)
            # SQLite gives the bare columns of the row that holds the one max() (its latest claim).
            sql = (
                f"SELECT e.originator_id, e.rowid, h.hash, MAX(e.originator_version) FROM {self.events_table_name} e"
                f" LEFT JOIN {CHAIN_TABLE} h ON h.position = e.rowid"
                f" WHERE e.originator_id IN ({marks(len(ids))}) AND e.topic LIKE ? GROUP BY e.originator_id"
            )
            for stream, position, digest, _ in self._query(sql, (*ids, CLAIM_TOPIC)):
                found[UUID(str(stream))] = (position, digest)
        return found

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:  # why: rows as sqlite3 gives them
        try:
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, params)
                return list(c.fetchall())
        except Exception as error:  # noqa: BLE001 - a log made before these tables has none of them
            if missing_table(error):
                return []
            raise

    # Watching and reading the log

    def watched_files(self) -> list[Path]:
        """The log's file (none for a log in memory): its writes are changes to the log."""
        pool = self.datastore.pool
        if pool.is_sqlite_memory_mode:
            return []
        name = pool.db_name
        return [Path(name[len("file:") :].split("?")[0] if name.startswith("file:") else name)]

    def listener(self) -> Listener | None:
        return None  # the file is watched instead

    def read_rows(self, after: int, limit: int, ids: dict[str, str]) -> Sequence[Row]:
        """The same rows select_notifications gives, without building a UUID per row."""
        sql = (
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name}"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, (after, limit))
            rows = c.fetchall()
        if len(ids) > MEMO_IDS:
            ids.clear()
        new = tuple.__new__
        try:
            return [new(Row, (n, ids.get(o) or ids.setdefault(o, dashed(o)), v, t, s)) for n, o, v, t, s in rows]
        except (TypeError, AttributeError) as error:  # an id edited to another type (a BLOB, a number): not a stream
            odd = next((n for n, o, *_ in rows if type(o) is not str), rows[0][0])
            raise UndecodableEvent(f"the event at position {odd}", error) from None

    def rebuild_log(self) -> DirectLog:
        """The log's SQLite file, for projections to read with SQLite itself (not when in memory)."""
        pool = self.datastore.pool
        if pool.is_sqlite_memory_mode or str(pool.db_name).startswith("file:"):
            return None
        return SQLiteLog(Path(pool.db_name), self.events_table_name)

    def relax_durability(self) -> None:
        """Commit with synchronous=NORMAL on this recorder's own connections (the notifier's).

        A NotificationDelivered must be committed before the next notification is sent (that is what
        bounds a controller's death to one repeat). With `synchronous=FULL` each commit waits for an
        fsync, which took longer than the POST itself here (about 1.6 ms against 0.5 ms). In WAL mode
        `synchronous=NORMAL` keeps every commit once the process dies (the OS holds it) and keeps the
        file consistent; only a power loss may forget the last commits: for this bookkeeping, a
        notification sent again with the same Idempotency-Key. Every other writer keeps the default."""
        self.synchronous = "NORMAL"  # set on the writer's connection before each save


def _row(position: int, e: StoredEvent) -> tuple[int, str, int, str, bytes]:  # an imported event, as stored
    return position, chain.stream_hex(e.originator_id), e.originator_version, e.topic, e.state


# The library names these classes by module path in its settings (PERSISTENCE_MODULE, APPLICATION_RECORDER_TOPIC):
# settings written before they moved here keep naming them where they were.
for _old in ("rollouts.adapters.recorders", "rollouts.adapters.store.recorders"):
    register_topic(f"{_old}:ChainedSQLiteRecorder", ChainedSQLiteRecorder)
    register_topic(f"{_old}:SQLiteStoreFactory", factory.SQLiteStoreFactory)
