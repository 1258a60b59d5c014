"""Notifications: which deployment changes a sink hears of (KINDS), and the document it is sent."""

from __future__ import annotations

from typing import Any, NamedTuple

from . import phases
from .errors import UsageError
from .reasons import AUTO_ROLLBACK  # the cause of an automatic rollback

KINDS = ("triggered", "running", "complete", "failed", "paused", "rollback")
DEFAULT_ON = ("complete", "failed")
_STARTS = frozenset({"Created", "RetryRequested"})  # a new deployment, or a new attempt of one


class UnknownKind(UsageError):
    """`--on` names a kind that is not one of KINDS (the CLI exits 2)."""


def parse_kinds(text: str) -> tuple[str, ...]:
    """`--on`: comma-separated KINDS, kept in KINDS order, each once."""
    given = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in given if k not in KINDS]
    if unknown or not given:
        raise UnknownKind(f"--on: unknown kind {(unknown or [text])[0]!r}; kinds are {', '.join(KINDS)}")
    return tuple(k for k in KINDS if k in given)


def kind_of(before: str | None, type_: str, after: str, data: dict[str, Any] | None = None) -> str | None:
    """The kind of change a deployment event made (phase `before` -> `after`), or None when it is not one.
    With the event's `data`: an automatic rollback's creation is `rollback` (7.6), not `triggered`."""
    if type_ == "Created" and data is not None and str(data.get("cause", "")).startswith(AUTO_ROLLBACK):
        return "rollback"
    if type_ in _STARTS:
        return "triggered"
    if type_ == "StepPaused":
        return "paused"
    if after == before:
        return None
    if after == phases.RUNNING:
        return "running"
    if after == phases.COMPLETE:
        return "complete"
    if after == phases.FAILED:
        return "failed"
    return None


def reason_of(type_: str, data: dict[str, Any], after: str) -> str | None:
    """Why a deployment is in `after` (as `rollout history` says it): only a failure has a reason; and
    why a deployment paused (step, inconclusive), and what an automatic rollback follows."""
    if type_ == "StepPaused":
        return f"paused: {data.get('why')}"
    if type_ == "Created" and str(data.get("cause", "")).startswith(AUTO_ROLLBACK):
        return data.get("message")
    if after != phases.FAILED:
        return None
    return "cancelled" if type_ in ("Cancelled", "CancelRequested") else data.get("reason")


class Change(NamedTuple):
    """One deployment change: what a sink that listens for its kind is sent (`document`)."""

    position: int
    kind: str
    config: str
    revision: int
    attempt: int
    phase: str
    reason: str | None
    actor: str | None
    timestamp: str
    promoted_from: dict[str, Any] | None = None  # 7.10: {config, revision} for a stage's promotion, else null

    def document(self) -> dict[str, Any]:
        """The body a sink is sent (DESIGN 7.4 keeps the key `version` for the revision)."""
        return {("version" if name == "revision" else name): value for name, value in self._asdict().items()}

    def key(self, log_id: str, sink: str) -> str:
        """The Idempotency-Key: the same for every send of this change to this sink, whoever sends it."""
        return f"{log_id}:{self.position}:{sink}"
