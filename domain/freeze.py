"""Change freezes: the home-wide freeze of `freeze --all` (the rules: domain/freeze_rules.py)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .freeze_rules import ALL_ID, Freeze, check_claimable, check_request, in_force
from .meta import Meta
from .topics import keep_stored_topics

__all__ = ["ALL_ID", "Freeze", "FreezeAll", "check_claimable", "check_request", "in_force"]


class FreezeAll(Aggregate):
    """The freeze of every config, those created meanwhile included (`freeze --all`)."""

    @staticmethod
    def create_id() -> UUID:
        return ALL_ID

    @event("Registered")
    def __init__(self, meta: Meta) -> None:
        self.freeze: Freeze | None = None

    def freeze_all(self, until: datetime | None, reason: str, now: datetime, meta: Meta) -> None:
        check_request(until, reason, now)
        self._frozen(until=until.isoformat() if until else None, reason=reason, meta=meta)

    def unfreeze_all(self, now: datetime, meta: Meta) -> None:
        if not in_force(self.freeze, now):
            raise DomainError("there is no freeze of --all in force")
        self._unfrozen(meta=meta)

    @event("Frozen")
    def _frozen(self, until: str | None, reason: str, meta: Meta) -> None:
        self.freeze = {"by": meta.get("actor"), "reason": reason, "until": until, "at": self.modified_on.isoformat()}

    @event("Unfrozen")
    def _unfrozen(self, meta: Meta) -> None:
        self.freeze = None


keep_stored_topics(globals())
