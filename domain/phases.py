"""Deployment phases: which events each phase allows, and the phase each event leads to (the one table)."""

from typing import Any

from .errors import IllegalTransition
from .step import POST

NEW, PENDING, RUNNING, COMPLETE, FAILED = "New", "Pending", "Running", "Complete", "Failed"
ACTIVE = frozenset({PENDING, RUNNING})
OPEN = frozenset({NEW, PENDING, RUNNING})
TERMINAL = frozenset({COMPLETE, FAILED})

# event type -> phases it may be applied in (DESIGN section 3).
ALLOWED_FROM: dict[str, frozenset[str]] = {
    "DeployerClaimed": frozenset({NEW}),
    "DeployerCreated": frozenset({PENDING, RUNNING}),
    "DeployerStarted": frozenset({PENDING, RUNNING}),
    "DeployerSucceeded": ACTIVE,
    "DeployerFailed": OPEN,  # New too: a deployment abandoned before its claim (domain/deployment.abandon)
    "DeployerLost": ACTIVE,
    "CancelRequested": OPEN,
    "Cancelled": ACTIVE,
    "RetryRequested": frozenset({FAILED}),
    "Approved": frozenset({NEW}),
    "HookCreated": ACTIVE,
    "HookStarted": ACTIVE,
    "HookSucceeded": ACTIVE,
    "HookFailed": ACTIVE,
    # DESIGN 7.6: measurements, pauses, promote and abort
    "MeasurementCreated": ACTIVE,
    "MeasurementStarted": ACTIVE,
    "MeasurementRecorded": ACTIVE,
    "StepPaused": ACTIVE,
    "PauseEnded": ACTIVE,
    "Promoted": ACTIVE,
    "ClaimTaken": ACTIVE,
    "AbortRequested": OPEN,
    "Aborted": ACTIVE,
    # DESIGN 7.11: a stop the controller decided (a timeout, a deletion), written before the signal
    "StopRequested": ACTIVE,
    # DESIGN 7.10: a queued revision that a newer queued one took the place of, before any claim
    "Superseded": frozenset({NEW}),
}


def check(phase: str, event: str) -> None:
    """Raise IllegalTransition unless `event` may happen in `phase`."""
    if phase not in ALLOWED_FROM[event]:
        raise IllegalTransition(f"{event} is not allowed in phase {phase}")


def phase_after_step(phase: str, nxt: dict[str, Any] | None) -> str:
    """The phase once a step ends well (`nxt`: the next step, as events carry it): Complete when nothing
    follows, Running for a post hook."""
    if nxt is None:
        return COMPLETE
    return RUNNING if nxt["kind"] == POST else phase


_FAILING = frozenset({"DeployerFailed", "DeployerLost", "Cancelled", "Aborted", "Superseded"})
# Events that end a step well and name the next one (None: the attempt is done, Complete).
_MOVES = frozenset(
    {"DeployerSucceeded", "HookSucceeded", "HookFailed", "MeasurementRecorded", "PauseEnded", "Promoted"}
)


def phase_after(phase: str | None, event: str, data: dict[str, Any]) -> str:
    """The phase a deployment is in after `event`, from the event alone: the one table of phase
    changes, which the Deployment aggregate, the projections and the audit all fold."""
    if event == "Created" or event == "RetryRequested":
        return NEW
    if event == "DeployerClaimed":
        return PENDING
    if event == "DeployerStarted":
        return RUNNING
    if event in _FAILING or (event in ("CancelRequested", "AbortRequested") and phase == NEW):
        return FAILED
    if event == "HookFailed" and data.get("outcome") == "abort":
        return FAILED
    if event == "MeasurementRecorded" and data.get("reason"):
        return FAILED
    if event in _MOVES:
        return phase_after_step(phase or NEW, data.get("next"))
    return phase or NEW
