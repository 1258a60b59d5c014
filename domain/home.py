"""The HomeBinding aggregate: the audited record of a home's bindings to a log (`rollouts home rebind`)."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from .meta import Meta
from .topics import keep_stored_topics


class HomeBinding(Aggregate):
    """One per home (named by its claimant id): who bound it to this log, when, and from where."""

    @staticmethod
    def create_id(claimant: str) -> UUID:
        return home_id(claimant)

    @event("Registered")
    def __init__(self, claimant: str, meta: Meta) -> None:
        self.claimant = claimant
        self.rebinds = 0

    def rebind(self, old_log_id: str | None, old_seen: int | None, log_id: str | None, head: int, meta: Meta) -> None:
        self._rebound(old_log_id=old_log_id, old_seen=old_seen, log_id=log_id, head=head, meta=meta)

    @event("Rebound")
    def _rebound(self, old_log_id: str | None, old_seen: int | None, log_id: str | None, head: int, meta: Meta) -> None:
        self.rebinds += 1


def home_id(claimant: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"/homes/{claimant}")


# Logs hold this aggregate's events as `domain.home:Home.Registered` and the like: they keep that name (DESIGN 7).
keep_stored_topics(globals(), renamed={"HomeBinding": "Home"})
