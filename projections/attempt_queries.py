"""Reading the audit view for a config's deployment attempts: each from its claim to its end."""

from __future__ import annotations

from dataclasses import dataclass

import sqlite_utils

from domain import phases
from projections.audit_queries import require_config
from projections.records import document

_EVENTS = (
    "SELECT position, type, version, timestamp, data FROM events WHERE config = ? AND stream IN "
    "(SELECT stream FROM streams WHERE kind = 'deployment') ORDER BY position"
)
_CANCELLING = frozenset({"Cancelled", "CancelRequested"})
COMPLETE, FAILED, CANCELLED, OPEN = "complete", "failed", "cancelled", "open"


@dataclass
class Attempt:
    """One run of a deployment: claimed at `start`, ended at `end` (None while it runs), hooks included.

    Positions are the log's: `first` is the claim, `last` the event that ended it (or the latest seen)."""

    version: int
    attempt: int
    start: str
    first: int
    end: str | None = None
    last: int = 0
    outcome: str = OPEN
    reason: str | None = None


def attempts(db: sqlite_utils.Database, name: str) -> list[Attempt]:
    """Config `name`'s attempts that were claimed, in the order of their claims (NotFound: no such config).

    An attempt ends with the event that makes its deployment Complete or Failed; a deployment
    cancelled or failed before its claim never ran and has no attempt here."""
    require_config(db, name)
    phase: dict[int, str] = {}
    running: dict[int, Attempt] = {}
    found: list[Attempt] = []
    for position, type_, version, timestamp, text in db.execute(_EVENTS, (name,)):
        data = document(text)[1]
        before = phase.get(version)
        phase[version] = after = phases.phase_after(before, type_, data)
        if type_ == "DeployerClaimed":
            running[version] = Attempt(version, data["attempt"], timestamp, position, last=position)
            found.append(running[version])
        current = running.get(version)
        if current is None:
            continue
        current.last = position
        if after in phases.TERMINAL and before not in phases.TERMINAL:
            current.end = timestamp
            current.outcome = _outcome(after, type_)
            current.reason = data.get("reason") if after == phases.FAILED else None
            del running[version]
    return found


def _outcome(phase: str, type_: str) -> str:
    if phase == phases.COMPLETE:
        return COMPLETE
    return CANCELLED if type_ in _CANCELLING else FAILED
