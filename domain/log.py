"""A log's own history: the seal that ends its writes (a move's first half) and the origin of an imported one.

A seal lives in a stream named after the sealed log's id, an origin in one named after the new log's:
a log imported from a sealed one holds the source's seal among its events, and is not sealed by it.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .ids import origin_id, seal_id
from .meta import Meta
from .topics import keep_stored_topics


class LogSeal(Aggregate):
    """The end of a log's writes: after it the log refuses every write and claim (reads still work)."""

    @staticmethod
    def create_id(log_id: str) -> UUID:
        return seal_id(log_id)

    @event("Sealed")
    def __init__(self, log_id: str, head: int, head_hash: str | None, reason: str | None, meta: Meta) -> None:
        self.log_id = log_id
        self.head = head  # the last position before the seal
        self.head_hash = head_hash
        self.reason = reason


class LogOrigin(Aggregate):
    """Where an imported log came from: the source's id and the head it was exported at."""

    @staticmethod
    def create_id(log_id: str) -> UUID:
        return origin_id(log_id)

    @event("Origin")
    def __init__(
        self, log_id: str, source_log_id: str | None, head: int, head_hash: str | None, fork: bool, meta: Meta
    ) -> None:
        self.log_id = log_id
        self.source_log_id = source_log_id
        self.head = head
        self.head_hash = head_hash
        self.fork = fork


keep_stored_topics(globals())
