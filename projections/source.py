"""What projections read: the log's notifications, its head and its identity."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from .records import Notification


class EventSource(Protocol):
    def head(self) -> int:
        """The highest notification id in the log (0 when empty)."""

    def read(self, after: int, limit: int) -> Sequence[Notification]:
        """Up to `limit` notifications with ids above `after`, in order."""

    def identity(self) -> str:
        """A value that tells this log from any other (empty while the log is empty)."""


class SQLiteLog(NamedTuple):
    """Where a log kept by eventsourcing's SQLite module is: its file, and the table of its events."""

    path: Path
    table: str


class PostgresLog(NamedTuple):
    """Where a log kept by eventsourcing's PostgreSQL module is: how to connect (libpq's conninfo,
    a password included when one was given: never print it), its schema, and the table of its events."""

    conninfo: str
    schema: str
    table: str

    def __repr__(self) -> str:  # never the conninfo: it may hold a password
        return f"PostgresLog(schema={self.schema!r}, table={self.table!r})"


DirectLog = SQLiteLog | PostgresLog | None  # where a rebuild reads the log itself (None: through its source)


@runtime_checkable
class LocalLog(Protocol):
    """A source whose log may be an SQLite file on this machine, which SQLite can then read itself."""

    def sqlite_log(self) -> SQLiteLog | None:
        """The log's file and table, or None when it is not an SQLite file."""


@runtime_checkable
class ServerLog(Protocol):
    """A source whose log may be in PostgreSQL, which a rebuild can then read with connections of its own."""

    def postgres_log(self) -> PostgresLog | None:
        """Where the log is, or None when it is not a PostgreSQL log."""


def direct_log(source: object) -> DirectLog:
    """Where a rebuild can read `source`'s log itself, bypassing the source; None when it cannot."""
    found = source.sqlite_log() if isinstance(source, LocalLog) else None
    if found is None and isinstance(source, ServerLog):
        return source.postgres_log()
    return found
