"""The SQLite backend: the log is events.db in the home, read and watched as a file."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ....domain.ids import dashed
from ....projections.records import UndecodableEvent
from ....projections.source import SQLiteLog
from ...home import Home, private_file
from ..port import CACHE, LeaseSQL, Listener, Query, Row, Snapshot, StoreUnavailable
from ..url import SQLiteInHome

if TYPE_CHECKING:
    from ....projections.source import DirectLog

T = TypeVar("T")
MEMO_IDS = 5_000  # a rebuild's batch shares them; a long-lived reader must not keep every id


class SQLiteBackend:
    """The log in the home's events.db, through eventsourcing's sqlite module."""

    shared = False  # one home, one host
    roles = False  # a file has no roles: --approval-identity db is refused
    lease = LeaseSQL(now="((julianday('now') - 2440587.5) * 86400.0)", mark="?", greatest="max")

    def __init__(self, home: Home) -> None:
        self.home = home
        self.store = SQLiteInHome()

    def shown(self) -> str:
        return str(self.home.events_db)

    def describe(self, error: BaseException) -> str:
        text = " ".join(str(error).split()) or type(error).__name__
        return f"cannot use the SQLite event store: {text}"

    def env(self) -> dict[str, str]:
        return {
            **CACHE,
            "PERSISTENCE_MODULE": "rollouts.adapters.store.recorders:SQLiteStoreFactory",
            "APPLICATION_RECORDER_TOPIC": "rollouts.adapters.store.recorders:ChainedSQLiteRecorder",
            "SQLITE_DBNAME": str(self.home.events_db),
            "SQLITE_LOCK_TIMEOUT": "10",
        }

    def open(self, construct: Callable[[dict[str, str]], T], reading: bool) -> T:
        try:
            with self.home.init_lock():
                private_file(self.home.events_db)
                return construct(self.env())
        except StoreUnavailable:
            raise
        except Exception as error:  # noqa: BLE001 - any driver error means "cannot use the store"
            raise StoreUnavailable(self.describe(error)) from None

    def has_log(self) -> bool:
        return self.home.events_db.exists()

    # Tables beside the log (leases)

    def table(self, name: str) -> str:
        return name

    def create_table(self, datastore: Any, ddl: str) -> None:
        with datastore.transaction(commit=True) as cursor:
            cursor.execute(ddl)

    def table_exists(self, datastore: Any, name: str) -> bool:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
            return cursor.fetchone() is not None

    def columns(self, datastore: Any, name: str) -> set[str]:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute(f"PRAGMA table_info({name})")
            return {row[1] for row in cursor.fetchall()}

    def add_column(self, datastore: Any, name: str, column: str, kind: str) -> None:
        try:
            self.create_table(datastore, f"ALTER TABLE {name} ADD COLUMN {column} {kind}")
        except Exception as error:  # noqa: BLE001 - the library wraps sqlite3's error
            if "duplicate column name" not in str(error):  # a controller starting beside us added it
                raise

    # Watching and reading the log

    def watched_files(self, recorder: Any) -> list[Path]:
        path = _file(recorder)
        return [path] if path is not None else []

    def listener(self, recorder: Any) -> Listener | None:
        return None  # the file is watched instead

    def read_rows(self, recorder: Any, after: int, limit: int, ids: dict[str, str]) -> Sequence[Row]:
        """The same rows select_notifications gives, without building a UUID per row."""
        sql = (
            f"SELECT rowid, originator_id, originator_version, topic, state FROM {recorder.events_table_name}"
            " WHERE rowid > ? ORDER BY rowid LIMIT ?"
        )
        with recorder.datastore.transaction(commit=False) as c:
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

    def rebuild_log(self, recorder: Any) -> DirectLog:
        """The log's SQLite file, for projections to read with SQLite itself (not when in memory)."""

        pool = recorder.datastore.pool
        if pool.is_sqlite_memory_mode or str(pool.db_name).startswith("file:"):
            return None
        return SQLiteLog(Path(pool.db_name), recorder.events_table_name)

    def glance(self, after: int, topic: str, wait: float) -> list[bytes]:
        path = self.home.events_db
        if not path.is_file():
            return []
        db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=wait)
        try:
            sql = "SELECT state FROM stored_events WHERE rowid > ? AND topic = ?"
            return [state for (state,) in db.execute(sql, (after, topic))]
        finally:
            db.close()

    @contextmanager
    def snapshot(self) -> Iterator[Snapshot]:
        path = self.home.events_db
        if not path.is_file():
            raise StoreUnavailable(f"cannot use the SQLite event store: no log at {path}")
        try:
            db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=10, isolation_level=None)
        except sqlite3.Error as error:
            raise StoreUnavailable(self.describe(error)) from None
        try:
            db.execute("BEGIN")  # one snapshot of the WAL for every statement

            def has_table(name: str) -> bool:
                sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
                return db.execute(sql, (name,)).fetchone() is not None

            query: Query = lambda sql, params: db.execute(sql, params).fetchall()  # noqa: E731
            yield Snapshot(query, "stored_events", "rowid", self.lease.mark, self.lease.now, has_table, self.table)
        except sqlite3.Error as error:
            raise StoreUnavailable(self.describe(error)) from None
        finally:
            db.close()

    def relax_durability(self, app: Any) -> None:
        """Commit with synchronous=NORMAL on `app`'s own connections (the notifier's).

        A NotificationDelivered must be committed before the next notification is sent (that is what
        bounds a controller's death to one repeat). With `synchronous=FULL` each commit waits for an
        fsync, which took longer than the POST itself here (about 1.6 ms against 0.5 ms). In WAL mode
        `synchronous=NORMAL` keeps every commit once the process dies (the OS holds it) and keeps the
        file consistent; only a power loss may forget the last commits: for this bookkeeping, a
        notification sent again with the same Idempotency-Key. Every other writer keeps the default."""
        app.recorder.synchronous = "NORMAL"  # set on the writer's connection before each save

    def undo_of_opening(self) -> Callable[[], None]:
        existed = self.home.events_db.exists()

        def undo() -> None:
            if not existed:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    self.home.events_db.with_name(self.home.events_db.name + suffix).unlink(missing_ok=True)

        return undo


def _file(recorder: Any) -> Path | None:
    """The log's file; None for a log in memory."""
    pool = recorder.datastore.pool
    if pool.is_sqlite_memory_mode:
        return None
    name = pool.db_name
    return Path(name[len("file:") :].split("?")[0] if name.startswith("file:") else name)
