"""The SQLite backend: the log is events.db in the home, read and watched as a file."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ...home import Home, private_file
from .. import opening
from ..port import CACHE, Datastore, LeaseSQL, LogRecorder, Opened, Query, Snapshot, StoreUnavailable
from ..url import SQLiteInHome

T = TypeVar("T")
# The library's setting APPLICATION_RECORDER_TOPIC: our recorder class, by its topic
RECORDER = "rollouts.adapters.store.sqlite.recorder:ChainedSQLiteRecorder"


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
            "PERSISTENCE_MODULE": "rollouts.adapters.store.sqlite.factory:SQLiteStoreFactory",
            "APPLICATION_RECORDER_TOPIC": RECORDER,
            "SQLITE_DBNAME": str(self.home.events_db),
            "SQLITE_LOCK_TIMEOUT": "10",
        }

    def open_app(self, construct: Callable[[dict[str, str]], Opened]) -> Opened:
        return opening.open_app(self, construct)

    def open_recorder(self) -> LogRecorder:
        return opening.open_recorder(self)

    def open(self, construct: Callable[[dict[str, str]], T], reading: bool) -> T:
        opening.load_recorder(RECORDER)  # eventsourcing's sqlite module loads only when a log opens
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

    def create_table(self, datastore: Datastore, ddl: str) -> None:
        with datastore.transaction(commit=True) as cursor:
            cursor.execute(ddl)

    def table_exists(self, datastore: Datastore, name: str) -> bool:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
            return cursor.fetchone() is not None

    def columns(self, datastore: Datastore, name: str) -> set[str]:
        with datastore.transaction(commit=False) as cursor:
            cursor.execute(f"PRAGMA table_info({name})")
            return {row[1] for row in cursor.fetchall()}

    def add_column(self, datastore: Datastore, name: str, column: str, kind: str) -> None:
        try:
            self.create_table(datastore, f"ALTER TABLE {name} ADD COLUMN {column} {kind}")
        except Exception as error:  # noqa: BLE001 - the library wraps sqlite3's error
            if "duplicate column name" not in str(error):  # a controller starting beside us added it
                raise

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

    def undo_of_opening(self) -> Callable[[], None]:
        existed = self.home.events_db.exists()

        def undo() -> None:
            if not existed:
                for suffix in ("", "-wal", "-shm", "-journal"):
                    self.home.events_db.with_name(self.home.events_db.name + suffix).unlink(missing_ok=True)

        return undo
