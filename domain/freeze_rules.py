"""Change freezes: when one is in force (the clock is passed in), and the stream of the freeze of all.

Apart from the aggregate (domain/freeze.py): the views and the audit read freezes without defining it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from .errors import DomainError, UsageError

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
