"""Change freezes: when one is in force (the clock is passed in), and the home-wide freeze of `freeze --all`."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from rollouts.domain.errors import DomainError, UsageError
from rollouts.domain.topics import keep_stored_topics

Meta = dict[str, Any]
Freeze = dict[str, Any]  # {"by": actor, "reason": text, "until": ISO UTC or None, "at": ISO UTC}
ALL_ID = uuid5(NAMESPACE_URL, "/freezes/all")


def in_force(freeze: Freeze | None, now: datetime) -> bool:
    """Whether `freeze` holds at `now` (a freeze with no `until` holds until it is lifted)."""
    if freeze is None:
        return False
    until = freeze.get("until")
    return until is None or now < datetime.fromisoformat(until)


def check_request(until: datetime | None, reason: str, now: datetime) -> None:
    """Refuse a freeze whose `until` is not after `now`, or that gives no reason."""
    if until is not None and until <= now:
        raise UsageError(f"--until {until.isoformat()} is not in the future")
    if not reason.strip():
        raise UsageError("a freeze needs a --reason")


def check_claimable(name: str, freezes: list[tuple[str, Freeze | None]], now: datetime) -> None:
    """Refuse a claim while a freeze (`scope`, freeze) of config `name` is in force at `now`."""
    for scope, freeze in freezes:
        if freeze is not None and in_force(freeze, now):
            until = freeze["until"] or "it is lifted"
            raise DomainError(f"config {name} is frozen ({scope}) until {until}: {freeze['reason']}")


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
