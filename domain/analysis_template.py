"""The AnalysisTemplate aggregate (DESIGN 7.9): a named, versioned analysis that configs reuse."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .ids import template_id
from .meta import Meta
from .topics import keep_stored_topics


class AnalysisTemplate(Aggregate):
    """A template's spec (domain.analysis.TemplateSpec as data) and its revision: 1 when created, one more at
    each change. A deleted template keeps its history; its name may be created again (a new revision)."""

    deleted = False

    @staticmethod
    def create_id(name: str) -> UUID:
        return template_id(name)

    @event("Created")
    def __init__(self, name: str, spec: dict[str, Any], reason: str | None, meta: Meta) -> None:
        self.name = name
        self.spec = spec
        self.revision = 1

    def change(self, spec: dict[str, Any], reason: str | None, meta: Meta) -> bool:
        """A new revision with `spec`; False (nothing appended) when it is the spec already in force."""
        if self.deleted:
            raise DomainError(f"analysis template {self.name} was deleted: create it again")
        if spec == self.spec:
            return False
        self._changed(spec=spec, reason=reason, meta=meta)
        return True

    def recreate(self, spec: dict[str, Any], reason: str | None, meta: Meta) -> None:
        if not self.deleted:
            raise DomainError(f"analysis template {self.name} already exists: change it with `analysis set`")
        self._changed(spec=spec, reason=reason, meta=meta)
        self.deleted = False

    def delete(self, meta: Meta) -> None:
        if self.deleted:
            raise DomainError(f"analysis template {self.name} is already deleted")
        self._deleted(meta=meta)

    @event("Changed")
    def _changed(self, spec: dict[str, Any], reason: str | None, meta: Meta) -> None:
        self.spec = spec
        self.revision += 1
        self.deleted = False

    @event("Deleted")
    def _deleted(self, meta: Meta) -> None:
        self.deleted = True


keep_stored_topics(globals())
