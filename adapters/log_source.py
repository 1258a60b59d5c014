"""The event log as projections read it, through the application's recorder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any


class RecorderSource:
    """EventSource over an eventsourcing ApplicationRecorder (SQLite or PostgreSQL)."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder

    def head(self) -> int:
        return self.recorder.max_notification_id() or 0

    def read(self, after: int, limit: int) -> Sequence[Any]:
        return self.recorder.select_notifications(start=after, limit=limit, inclusive_of_start=False)

    def identity(self) -> str:
        first = self.recorder.select_notifications(start=None, limit=1)
        if not first:
            return ""
        n = first[0]
        return hashlib.sha256(f"{n.originator_id}:{n.originator_version}:".encode() + n.state).hexdigest()[:16]
