"""Reading the audit view for a config's deployment attempts: each from its claim to its end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..domain import phases
from .audit_queries import require_config
from .records import document

if TYPE_CHECKING:
    import sqlite_utils

_EVENTS = (
    "SELECT position, type, revision, timestamp, data FROM events WHERE config = ? AND stream IN "
    "(SELECT stream FROM streams WHERE kind = 'deployment') ORDER BY position"
)
_CANCELLING = frozenset({"Cancelled", "CancelRequested"})
COMPLETE, FAILED, CANCELLED, OPEN = "complete", "failed", "cancelled", "open"


@dataclass
class Attempt:
    """One run of a deployment: claimed at `start`, ended at `end` (None while it runs), hooks included.

    Positions are the log's: `first` is the claim, `last` the event that ended it (or the latest seen)."""

    revision: int
    attempt: int
    start: str
    first: int
    end: str | None = None
    last: int = 0
    outcome: str = OPEN
    reason: str | None = None
    # 7.6: (time, kind, label) of what happened inside the attempt: a step's deployer done ("step"),
    # a measurement ("passed", "failed", "inconclusive"), a pause ("paused"), a promote ("promoted")
    marks: list[tuple[str, str, str]] = field(default_factory=list)
    rolled_back_as: int | None = None  # the revision of the automatic rollback that followed this failure


_AUTO_ROLLBACK = "automatic rollback to"  # (domain.deployment.AUTO_ROLLBACK)


def _mark(type_: str, data: dict[str, Any]) -> tuple[str, str] | None:
    """The kind and label of a mark inside an attempt's bar, for an event of steps and verification."""
    if type_ == "DeployerSucceeded" and "-step-" in str(data.get("name", "")):
        return "step", f"step {str(data['name']).rsplit('-', 1)[-1]} deployed"
    if type_ == "MeasurementRecorded":
        return str(
            data.get("outcome")
        ), f"measurement {data.get('number')} (step {data.get('step')}): {data.get('outcome')}"
    if type_ == "StepPaused":
        return "paused", f"paused after step {data.get('step')} ({data.get('why')})"
    if type_ == "Promoted":
        return "promoted", f"promoted{' --full' if data.get('full') else ''} at step {data.get('step')}"
    return None


def attempts(db: sqlite_utils.Database, name: str) -> list[Attempt]:
    """Config `name`'s attempts that were claimed, in the order of their claims (NotFound: no such config).

    An attempt ends with the event that makes its deployment Complete or Failed; a deployment
    cancelled or failed before its claim never ran and has no attempt here."""
    require_config(db, name)
    phase: dict[int, str] = {}
    running: dict[int, Attempt] = {}
    found: list[Attempt] = []
    for position, type_, revision, timestamp, text in db.execute(_EVENTS, (name,)):
        data = document(text)[1]
        before = phase.get(revision)
        phase[revision] = after = phases.phase_after(before, type_, data)
        if type_ == "DeployerClaimed":
            running[revision] = Attempt(revision, data["attempt"], timestamp, position, last=position)
            found.append(running[revision])
        if type_ == "Created" and str(data.get("cause", "")).startswith(_AUTO_ROLLBACK):
            for failed in found:  # the failed revision is the one before (rollout.rollback_due)
                if failed.revision == revision - 1 and failed.outcome == FAILED:
                    failed.rolled_back_as = revision
        current = running.get(revision)
        if current is None:
            continue
        current.last = position
        mark = _mark(type_, data)
        if mark is not None:
            current.marks.append((timestamp, *mark))
        if after in phases.TERMINAL and before not in phases.TERMINAL:
            current.end = timestamp
            current.outcome = _outcome(after, type_)
            current.reason = data.get("reason") if after == phases.FAILED else None
            del running[revision]
    return found


def _outcome(phase: str, type_: str) -> str:
    if phase == phases.COMPLETE:
        return COMPLETE
    return CANCELLED if type_ in _CANCELLING else FAILED
