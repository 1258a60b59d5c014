"""The Sink aggregate: where notifications go, which ones, and how far they were delivered."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .meta import Meta
from .topics import keep_stored_topics


def sink_id(name: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/sinks/{name}")


class Sink(Aggregate):
    """One sink. `delivered` is the position of the last change it was sent (and answered 2xx) or,
    before any, the log's head when it was added; its version orders every delivery (optimistic
    concurrency: of two controllers, the one whose NotificationDelivered conflicts stops)."""

    @staticmethod
    def create_id(name: str) -> UUID:
        return sink_id(name)

    @event("SinkAdded")
    def __init__(self, name: str, url: str, on: list[str], config: str | None, start: int, meta: Meta) -> None:
        self.name = name
        self._define(url, on, config, start)

    def _define(self, url: str, on: list[str], config: str | None, start: int) -> None:
        self.url, self.on, self.config = url, list(on), config
        self.delivered = start
        self.removed = False
        self.last_error: str | None = None

    def wants(self, kind: str, config: str) -> bool:
        return kind in self.on and (self.config is None or self.config == config)

    # -- commands ------------------------------------------------------------

    def readd(self, url: str, on: list[str], config: str | None, start: int, meta: Meta) -> None:
        if not self.removed:
            raise DomainError(f"sink {self.name!r} already exists: remove it first")
        self._readded(url=url, on=on, config=config, start=start, meta=meta)

    def remove(self, meta: Meta) -> None:
        self._removed(meta=meta)

    def deliver(self, position: int, meta: Meta) -> None:
        if position <= self.delivered:
            raise DomainError(f"sink {self.name!r} was delivered up to {self.delivered} already")
        self._delivered(position=position, meta=meta)

    def fail(self, position: int, error: str, meta: Meta) -> bool:
        """Record a failed delivery, once per error text (a retry that fails alike records nothing)."""
        if error == self.last_error:
            return False
        self._failed(position=position, error=error, meta=meta)
        return True

    # -- events --------------------------------------------------------------

    @event("SinkReadded")
    def _readded(self, url: str, on: list[str], config: str | None, start: int, meta: Meta) -> None:
        self._define(url, on, config, start)

    @event("SinkRemoved")
    def _removed(self, meta: Meta) -> None:
        self.removed = True

    @event("NotificationDelivered")
    def _delivered(self, position: int, meta: Meta) -> None:
        self.delivered = position
        self.last_error = None

    @event("NotificationFailed")
    def _failed(self, position: int, error: str, meta: Meta) -> None:
        self.last_error = error


keep_stored_topics(globals())
