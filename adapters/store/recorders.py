"""The library's recorders, extended: every insert chains its events' hashes, and a log knows its id.

The hashes go to a table of their own (`rollouts_chain`: position, hash), written in the very
transaction that inserts the events. The previous hash is read there too, after the insert: on
SQLite the insert holds the database's write lock, on PostgreSQL the library's LOCK TABLE ... IN
EXCLUSIVE MODE, so no other writer can slip an event in between. The log's id (`rollouts_log`) is
written once, when the tables are created (opens are serialised by the home's lock or an advisory
lock), never on an ordinary open.
"""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import IntegrityError, InterfaceError, StoredEvent
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteFactory,
)

from ...domain.errors import DomainError
from ...domain.ids import seal_id
from ..sql_lists import chunks, marks, padded, shape
from . import chain
from .failures import missing_table
from .port import CHAIN_TABLE, LOG_TABLE, Row

if TYPE_CHECKING:
    from .port import Backend

BATCH = 5_000
CLAIM_TOPIC = "%.DeployerClaimed"
SNAPSHOTS = "stored_snapshots"  # the library's table of aggregate snapshots in a SQLite log
# Events from which `log verify` walks the log in parts, a forked process each: a fork costs a few ms, a walk
# about 3 us an event (20,045 events on two cores: 64 ms in one walk, 46 in two parts; read + hashlib 37)
PARALLEL_FROM = 10_000
WANTED_MOST = 256  # streams in one events_after statement (rows of VALUES: SQLite's compound limit is 500)
_MMAP_BYTES = 1 << 30  # a long read's connection maps up to this much of the file
STATEMENTS = 128  # prepared statements each connection of the log keeps (sqlite3's default)


Guards = Sequence[tuple[UUID, int]]  # streams a decision read but does not write, and the version it read


class ReadGuardBroken(IntegrityError):
    """A stream that a decision read (and does not write) changed before the decision was saved: decide again."""


def check_guards(found: Sequence[tuple[UUID, int | None]], guards: Guards) -> None:
    for (stream, version), (_, now) in zip(guards, found, strict=True):
        if (now or 0) != version:
            raise ReadGuardBroken(f"stream {stream} moved from version {version} to {now} meanwhile")


HashedRow = tuple[int, Any, int, str, bytes, str | None]  # position, stream, version, topic, state, hash


class Imported(NamedTuple):
    """An event of an imported log: where it stood in its log, and whether it was chained there."""

    position: int
    event: StoredEvent
    chained: bool


def chained_part(batch: Sequence[Imported]) -> tuple[list[int], list[StoredEvent]]:
    """The positions and events of `batch` that their log chained (the others came before its chain)."""
    found = [(i.position, i.event) for i in batch if i.chained]
    return [p for p, _ in found], [e for _, e in found]


class LogSealed(DomainError):
    """The log is sealed (moved elsewhere): it takes no more events (the CLI exits 1; nothing is written)."""

    def __init__(self, log_id: str, position: int) -> None:
        super().__init__(
            f"the log {log_id} is sealed (position {position}): it takes no write and no claim; reads still work"
            " (it moved: use the store its export was imported into)"
        )
        self.position = position


class HeadMoved(IntegrityError):
    """The log went on past the head a decision read (a seal decides on the whole log): decide again."""


Tail = Callable[[Callable[[Sequence[UUID]], list[StoredEvent]]], list[StoredEvent]]


class StoreNotEmpty(Exception):
    """An import's target already holds events (nothing was written)."""

    def __init__(self, head: int) -> None:
        super().__init__(f"the store is not empty (its log ends at position {head})")
        self.head = head


class StatementCachingPool(SQLiteConnectionPool):
    """The library's pool, whose connections keep their prepared statements: the library asks sqlite3
    for `cached_statements=True`, a cache of one, so every other statement was prepared again on each
    use (a load's snapshot-and-events statement took ~0.4 ms to prepare, ~0.02 ms to run). Otherwise the
    library's connection, as eventsourcing 9.5 makes it: WAL mode, rows by name; with `cache_kib`, each
    connection caches at most that many KiB of the file's pages (a long-lived controller's)."""

    def __init__(self, *args: Any, cache_kib: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cache_kib = cache_kib

    def _create_connection(self) -> SQLiteConnection:
        try:
            c = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,  # autocommit: the library's transactions BEGIN themselves
                cached_statements=STATEMENTS,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            cursor = c.cursor()
            cursor.execute("PRAGMA journal_mode;")
            if cursor.fetchone()[0].lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL;")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        if self.cache_kib is not None:
            c.execute(f"PRAGMA cache_size = -{int(self.cache_kib)}")
        c.row_factory = sqlite3.Row
        return SQLiteConnection(sqlite_conn=c, max_age=self.max_age)


class SQLiteStoreFactory(SQLiteFactory):
    """The library's SQLite factory (the backend's PERSISTENCE_MODULE), its datastore on a StatementCachingPool
    (its connections' page caches bounded by the setting SQLITE_CACHE_KIB, when given)."""

    SQLITE_CACHE_KIB = "SQLITE_CACHE_KIB"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        cache_kib = self.env.get(self.SQLITE_CACHE_KIB)
        given = self.datastore.pool  # nothing opened yet: replaced by one of the same settings
        self.datastore.pool = StatementCachingPool(
            db_name=given.db_name,
            lock_timeout=given.lock_timeout,
            pool_size=given.pool_size,
            max_overflow=given.max_overflow,
            pool_timeout=given.pool_timeout,
            max_age=given.max_age,
            pre_ping=given.pre_ping,
            cache_kib=int(cache_kib) if cache_kib else None,
        )


class ChainedSQLiteRecorder(SQLiteApplicationRecorder):
    """SQLite: events, their hashes and the log's id in one file."""

    backend: Backend  # set by adapters.bootstrap, which opened it
    _log_id: str | None = None  # the store's log id, read at its first save (fixed once made)
    synchronous: str | None = None  # PRAGMA synchronous for this recorder's saves (None: SQLite's default)

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (position INTEGER PRIMARY KEY, hash TEXT NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {LOG_TABLE} (log_id TEXT NOT NULL, created_at TEXT NOT NULL)",
        ]

    def create_table(self) -> None:
        super().create_table()
        if self.log_id() is None:
            with self.datastore.transaction(commit=True) as c:
                c.execute(f"INSERT INTO {LOG_TABLE} VALUES (?, datetime('now'))", (uuid.uuid4().hex,))

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if self.synchronous is None:
            return super().insert_events(stored_events, **kwargs)
        with self.datastore.get_connection(commit=True) as conn:
            # Per connection, and refused inside a transaction: so on the writer's connection, before BEGIN.
            conn.cursor().execute(f"PRAGMA synchronous={self.synchronous}")
            with conn.transaction(commit=True) as c:
                return self._insert_events(c, stored_events, **kwargs)

    def _insert_events(self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        ids = super()._insert_events(c, stored_events, **kwargs)
        if ids:
            self._fence(c, ids[0], kwargs.get("head"))
            self._chain(c, ids, stored_events)
        self._guard(c, kwargs.get("guards") or ())
        return ids

    def _fence(self, c: Any, first: int, head: int | None) -> None:
        """After the insert (which holds the write lock): the log is not sealed before these events, and,
        given `head`, it still ended there (a seal's decision read the whole log)."""
        if self._log_id is None:  # fixed once made: read once
            c.execute(f"SELECT log_id FROM {LOG_TABLE} LIMIT 1")
            self._log_id = first_value(list(c.fetchall()))
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

    def _guard(self, c: Any, guards: Guards) -> None:
        """After the insert (which holds the write lock): the guarded streams are as the decision read them."""
        found = []
        for stream, _ in guards:
            sql = f"SELECT max(originator_version) FROM {self.events_table_name} WHERE originator_id = ?"
            c.execute(sql, (stream.hex,))
            found.append((stream, c.fetchone()[0]))
        check_guards(found, guards)

    def _chain(self, c: Any, ids: Sequence[int], stored_events: Sequence[StoredEvent]) -> None:
        c.execute(f"SELECT position, hash FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1")
        last = c.fetchone()
        after, previous = (last[0], last[1]) if last else (0, chain.ZERO)
        if after < ids[0] - 1:  # events before the chain (or written without it): covered from here on
            c.execute(
                f"SELECT originator_id, originator_version, topic, state FROM {self.events_table_name}"
                " WHERE rowid > ? AND rowid < ? ORDER BY rowid",
                (after, ids[0]),
            )
            previous = chain.fold(previous, c.fetchall())
        records = [(s.originator_id, s.originator_version, s.topic, s.state) for s in stored_events]
        rows = zip(ids, chain.hashes_after(previous, records), strict=True)
        c.executemany(f"INSERT INTO {CHAIN_TABLE} (position, hash) VALUES (?, ?)", list(rows))

    def import_events(self, batches: Iterable[Sequence[Imported]], tail: Tail) -> int:
        """Insert every batch at the positions it had, chaining what was chained, and then the events
        `tail` returns (given a reader of streams inside the transaction) after them, in ONE transaction on
        an empty store: an exception from `batches` or `tail` (a line that does not hold) leaves the store
        as it was. The store keeps its own log id. (Events name positions: a delivered notification's.)"""
        count = 0
        insert = (
            f"INSERT INTO {self.events_table_name} (rowid, originator_id, originator_version, topic, state)"
            " VALUES (?, ?, ?, ?, ?)"
        )
        with self.datastore.transaction(commit=True) as c:
            c.execute(f"SELECT max(rowid) FROM {self.events_table_name}")
            if head := c.fetchone()[0]:
                raise StoreNotEmpty(head)
            last = 0
            for batch in batches:
                rows = [(p, e.originator_id.hex, e.originator_version, e.topic, e.state) for p, e, _ in batch]
                c.executemany(insert, rows)
                ids, events = chained_part(batch)
                if ids:
                    self._chain(c, ids, events)
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
                c.executemany(
                    insert,
                    [
                        (p, e.originator_id.hex, e.originator_version, e.topic, e.state)
                        for p, e in zip(ids, added, strict=True)
                    ],
                )
                self._chain(c, ids, added)
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

    def file_and_table(self) -> tuple[str, str]:
        """Where the log is, for a process of its own reading a part of it (sqlite_hashed)."""
        return str(self.datastore.pool.db_name), self.events_table_name

    def parts(self, count: int, smallest: int = PARALLEL_FROM) -> list[Part] | None:
        """The log cut into `count` consecutive parts that can be walked apart (each from the hash stored
        before it), or None when it is small or does not start chained (a walk from zero is needed)."""
        table, db = self.events_table_name, str(self.datastore.pool.db_name)
        rows = self._query(
            f"SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table}),"
            f" (SELECT min(position) FROM {CHAIN_TABLE}), (SELECT max(position) FROM {CHAIN_TABLE})",
            (),
        )
        if not rows or None in tuple(rows[0]) or count < 2:
            return None
        first, last, first_hashed, last_hashed = rows[0]
        if first != first_hashed or last - first < smallest:
            return None
        end = max(last, last_hashed)
        bounds = [first + i * (end - first + 1) // count for i in range(count)] + [end + 1]
        parts = []
        for lo, hi in itertools.pairwise(bounds):
            before = self._query(
                f"SELECT hash FROM {CHAIN_TABLE} WHERE position < ? ORDER BY position DESC LIMIT 1", (lo,)
            )
            if lo != first and not before:
                return None
            parts.append(Part(db, table, lo, hi - 1, before[0][0] if lo != first else chain.ZERO))
        return parts

    def events_of(self, streams: Sequence[UUID], until: int) -> list[Row]:
        """The events of `streams` at or before position `until` (an index lookup per stream)."""
        found: list[Row] = []
        for chunk in chunks([s.hex for s in streams]):
            ids = padded(chunk)
            sql = (
                f"SELECT rowid, originator_id, originator_version, topic, state FROM {self.events_table_name}"
                f" WHERE originator_id IN ({marks(len(ids))}) AND rowid <= ?"
            )
            found += [Row(*r) for r in self._query(sql, (*ids, until))]
        return found

    def events_after(
        self, wanted: Sequence[tuple[UUID, int | None]], snapshots: Any
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
        return first_value(self._query(f"SELECT hash FROM {CHAIN_TABLE} WHERE position = ?", (position,)))

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

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, params)
                return list(c.fetchall())
        except Exception as error:  # noqa: BLE001 - a log made before these tables has none of them
            if missing_table(error):
                return []
            raise


@dataclass(frozen=True)
class Part:
    """Positions lo..hi of a SQLite log, walked from `start` (the hash stored before lo)."""

    db: str
    table: str
    lo: int
    hi: int
    start: str


def verify_part(part: Part, keep: int | None) -> chain.ChainVerdict:
    """In a worker process: the chain over one part of the log."""
    walk = sqlite_walk(part.db, part.table, part.lo, part.hi)
    return chain.verify(walk, keep, part.start)


_SQLITE_HASHED = (
    "SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, h.hash"
    " FROM {0} e LEFT JOIN {1} h ON h.position = e.rowid WHERE e.rowid BETWEEN ? AND ? ORDER BY e.rowid"
)


def sqlite_hashed(db: str, table: str, lo: int, hi: int | None) -> Iterator[HashedRow]:
    """Events lo..hi of a SQLite log joined with their hashes, in position order (one statement: one snapshot)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:  # (opening the log made the chain table, so it is there)
        conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")  # the join probes the chain's pages: map, don't read them
        yield from conn.execute(_SQLITE_HASHED.format(table, CHAIN_TABLE), (lo, 2**63 - 1 if hi is None else hi))
    finally:
        conn.close()


def sqlite_walk(db: str, table: str, lo: int, hi: int | None) -> Iterator[tuple[Any, ...]]:
    """Events lo..hi (hi None: to the end) and their hashes, two ordered scans of one snapshot, merged."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    top = 2**63 - 1 if hi is None else hi
    try:
        conn.execute("BEGIN")  # one snapshot for both scans
        events = conn.execute(
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {table}"
            " WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
            (lo, top),
        )
        try:
            hashes: Iterable[tuple[int, str]] = conn.execute(
                f"SELECT position, hash FROM {CHAIN_TABLE} WHERE position BETWEEN ? AND ? ORDER BY position", (lo, top)
            )
        except sqlite3.OperationalError:  # a log made before the chain
            hashes = ()
        yield from merge(events, hashes)
    finally:
        conn.close()


def merge(events: Iterable[Any], hashes: Iterable[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
    """Events and chain rows, both in position order, joined on position (a hash alone: stream None)."""
    pending = iter(hashes)
    hashed = next(pending, None)
    for event in events:
        position = event[0]
        while hashed is not None and hashed[0] < position:
            yield (hashed[0], None, None, None, None, hashed[1])
            hashed = next(pending, None)
        if hashed is not None and hashed[0] == position:
            yield (*event, hashed[1])
            hashed = next(pending, None)
        else:
            yield (*event, None)
    while hashed is not None:
        yield (hashed[0], None, None, None, None, hashed[1])
        hashed = next(pending, None)


def first_value(rows: list[Any]) -> Any:
    if not rows:
        return None
    row = rows[0]
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
