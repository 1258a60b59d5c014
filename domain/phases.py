"""Deployment phases and the table of which events each phase allows."""

from domain.errors import IllegalTransition

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
    "DeployerFailed": ACTIVE,
    "DeployerLost": ACTIVE,
    "CancelRequested": OPEN,
    "Cancelled": ACTIVE,
    "RetryRequested": frozenset({FAILED}),
    "HookCreated": ACTIVE,
    "HookStarted": ACTIVE,
    "HookSucceeded": ACTIVE,
    "HookFailed": ACTIVE,
}


def check(phase: str, event: str) -> None:
    """Raise IllegalTransition unless `event` may happen in `phase`."""
    if phase not in ALLOWED_FROM[event]:
        raise IllegalTransition(f"{event} is not allowed in phase {phase}")


def phase_after_step(phase: str, nxt: dict | None) -> str:
    """The phase once a step ends well: Complete when nothing follows, Running for a post hook."""
    if nxt is None:
        return COMPLETE
    return RUNNING if nxt["kind"] == "post" else phase


_FAILING = frozenset({"DeployerFailed", "DeployerLost", "Cancelled"})


def phase_after(phase: str | None, event: str, data: dict) -> str:
    """The phase a deployment is in after `event`, from the event alone (for folds and audits)."""
    if event == "Created" or event == "RetryRequested":
        return NEW
    if event == "DeployerClaimed":
        return PENDING
    if event == "DeployerStarted":
        return RUNNING
    if event in _FAILING or (event == "CancelRequested" and phase == NEW):
        return FAILED
    if event == "HookFailed" and data.get("outcome") == "abort":
        return FAILED
    if event in ("DeployerSucceeded", "HookSucceeded", "HookFailed"):
        return phase_after_step(phase or NEW, data.get("next"))
    return phase or NEW
