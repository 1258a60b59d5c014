"""What projections read: the log's notifications, its head and its identity."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from projections.records import Notification


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


@runtime_checkable
class LocalLog(Protocol):
    """A source whose log may be an SQLite file on this machine, which SQLite can then read itself."""

    def sqlite_log(self) -> SQLiteLog | None:
        """The log's file and table, or None when it is not an SQLite file."""
