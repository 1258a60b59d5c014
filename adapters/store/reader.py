"""The event log as projections read it, through the application's recorder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from ...projections.records import UndecodableEvent
from ...projections.source import PostgresLog, SQLiteLog
from .port import LogRecorder, Row

__all__ = ["RecorderSource", "Row"]


class RecorderSource:
    """EventSource over the application's recorder, read in its backend's dialect."""

    def __init__(self, recorder: LogRecorder) -> None:
        self.recorder = recorder
        self._ids: dict[str, str] = {}  # stored id -> dashed: a stream's events share one string

    def head(self) -> int:
        return self.recorder.max_notification_id() or 0

    def read(self, after: int, limit: int) -> Sequence[Any]:  # Rows, as projections read Notifications
        return self.recorder.read_rows(after, limit, self._ids)

    def sqlite_log(self) -> SQLiteLog | None:
        """The log's SQLite file, for projections to read with SQLite itself (not when in memory)."""
        log = self.recorder.rebuild_log()
        return log if isinstance(log, SQLiteLog) else None

    def postgres_log(self) -> PostgresLog | None:
        """Where the PostgreSQL log is, for a rebuild to read it with connections of its own."""
        log = self.recorder.rebuild_log()
        return log if isinstance(log, PostgresLog) else None

    def identity(self) -> str:
        # The first row as stored (read_rows: the id dashed as str(UUID) gives it, not parsed): a hand edit may
        # leave anything there, and the views then say where the log is damaged, as for any other row.
        first = self.recorder.read_rows(0, 1, {})
        if not first:
            return ""
        n = first[0]
        state = n.state.encode() if isinstance(n.state, str) else n.state  # a hand-edited row may hold text
        if not isinstance(state, bytes):  # a NULL or a number
            raise UndecodableEvent(f"the event at position {n.id}", TypeError(f"its data is {type(state).__name__}"))
        return hashlib.sha256(f"{n.originator_id}:{n.originator_version}:".encode() + state).hexdigest()[:16]
