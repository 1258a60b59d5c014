"""What projections read: the log's notifications, its head and its identity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from projections.records import Notification


class EventSource(Protocol):
    def head(self) -> int:
        """The highest notification id in the log (0 when empty)."""

    def read(self, after: int, limit: int) -> Sequence[Notification]:
        """Up to `limit` notifications with ids above `after`, in order."""

    def identity(self) -> str:
        """A value that tells this log from any other (empty while the log is empty)."""
