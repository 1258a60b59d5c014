"""The AnalysisTemplate aggregate (DESIGN 7.9): a named, versioned analysis that configs reuse."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .ids import template_id
from .meta import Meta
from .topics import keep_stored_topics

# A template's cadence and limits as TemplateSpec defaults them (here as plain values: a claim reads them
# without loading the validated model).
CADENCE = {"count": 3, "interval": 10, "failure_limit": 0, "inconclusive_limit": 0}


class AnalysisTemplate(Aggregate):
    """A template's spec (domain.analysis.TemplateSpec as data) and its revision: 1 when created, one more at
    each change. A deleted template keeps its history; its name may be created again (a new revision)."""

    deleted = False
    users: tuple[str, ...] = ()  # the configs whose spec names it (each such change saved with the config's)

    @staticmethod
    def create_id(template: str) -> UUID:
        return template_id(template)

    # (`template`, not `name`: the views take a first event's `name` for a config's)
    @event("Created")
    def __init__(self, template: str, spec: dict[str, Any], reason: str | None, meta: Meta) -> None:
        self.name = template
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
        if self.users:
            raise DomainError(f"analysis template {self.name} is used by config {', '.join(self.users)}")
        self._deleted(meta=meta)

    def named_by(self, config: str, meta: Meta) -> bool:
        """A config's spec names this template from now on; False when it did already."""
        if self.deleted:
            raise DomainError(f"analysis template {self.name} was deleted")
        if config in self.users:
            return False
        self._named_by(config=config, meta=meta)
        return True

    def unnamed_by(self, config: str, meta: Meta) -> bool:
        """A config's spec no longer names this template; False when it did not."""
        if config not in self.users:
            return False
        self._unnamed_by(config=config, meta=meta)
        return True

    @event("NamedBy")
    def _named_by(self, config: str, meta: Meta) -> None:
        self.users = tuple(sorted({*self.users, config}))

    @event("UnnamedBy")
    def _unnamed_by(self, config: str, meta: Meta) -> None:
        self.users = tuple(u for u in self.users if u != config)

    @event("Changed")
    def _changed(self, spec: dict[str, Any], reason: str | None, meta: Meta) -> None:
        self.spec = spec
        self.revision += 1
        self.deleted = False

    @event("Deleted")
    def _deleted(self, meta: Meta) -> None:
        self.deleted = True


keep_stored_topics(globals())
