"""The SinkIndex aggregate: the names of the sinks that exist, so one read finds them all."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from .errors import DomainError, NotFound
from .meta import Meta
from .topics import keep_stored_topics

INDEX_ID = uuid5(NAMESPACE_URL, "/sinks")


class SinkIndex(Aggregate):
    """One per log. Adding and removing a sink changes it, so two adds of one name conflict."""

    @staticmethod
    def create_id() -> UUID:
        return INDEX_ID

    @event("SinkIndexOpened")
    def __init__(self, meta: Meta) -> None:
        self.names: list[str] = []

    def list_sink(self, name: str, meta: Meta) -> None:
        if name in self.names:
            raise DomainError(f"sink {name!r} already exists: remove it first")
        self._listed(name=name, meta=meta)

    def unlist(self, name: str, meta: Meta) -> None:
        if name not in self.names:
            raise NotFound(f"sink {name!r} not found")
        self._unlisted(name=name, meta=meta)

    @event("SinkListed")
    def _listed(self, name: str, meta: Meta) -> None:
        self.names = [*self.names, name]

    @event("SinkUnlisted")
    def _unlisted(self, name: str, meta: Meta) -> None:
        self.names = [n for n in self.names if n != name]


keep_stored_topics(globals())
