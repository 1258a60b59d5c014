"""The library's SQLite factory, as the SQLite backend configures it: connections that keep their statements."""

from __future__ import annotations

import sqlite3

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteFactory,
)
from eventsourcing.utils import Environment

STATEMENTS = 128  # prepared statements each connection of the log keeps (sqlite3's default)


class StatementCachingPool(SQLiteConnectionPool):
    """The library's pool, whose connections keep their prepared statements: the library asks sqlite3
    for `cached_statements=True`, a cache of one, so every other statement was prepared again on each
    use (a load's snapshot-and-events statement took ~0.4 ms to prepare, ~0.02 ms to run). Otherwise the
    library's connection, as eventsourcing 9.5 makes it: WAL mode, rows by name; with `cache_kib`, each
    connection caches at most that many KiB of the file's pages (a long-lived controller's)."""

    def __init__(
        self,
        *,
        db_name: str,
        lock_timeout: int | None = None,
        pool_size: int = 5,
        max_overflow: int = 10,
        pool_timeout: float = 5.0,
        max_age: float | None = None,
        pre_ping: bool = False,
        cache_kib: int | None = None,
    ) -> None:
        super().__init__(
            db_name=db_name,
            lock_timeout=lock_timeout,
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_timeout=pool_timeout,
            max_age=max_age,
            pre_ping=pre_ping,
        )
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

    def __init__(self, env: Environment) -> None:
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
