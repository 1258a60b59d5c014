"""Lowering a config's approval guard (DESIGN 7.11): `config approve`, and what `config show` says is pending."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...projections.audit_queries import last_of_types
from ...projections.records import document

if TYPE_CHECKING:
    import sqlite_utils

    from .application import RolloutsApp

REQUESTED, APPROVED = "GuardLoweringRequested", "GuardLoweringApproved"


def approve(app: RolloutsApp, name: str, meta: dict[str, Any]) -> dict[str, Any]:
    """Let NAME's pending lowering take effect, decided on the config as the log has it now (I4); the guard
    as it was asked for. Refused (DomainError) with none pending, or by an approver the mode cannot tell
    from who asked."""

    def decision() -> tuple[list[Any], dict[str, Any]]:
        config = app.config(name)
        return [config], config.approve_guard(meta)

    return app.decide(decision)


def pending(audit: sqlite_utils.Database, name: str, until: int | None = None) -> dict[str, Any] | None:
    """The lowering of NAME's guard that waits for `config approve` (up to position `until`), from the audit
    view: the last request, if no approval came after it. Keys: position, actor, at, require_approval,
    approval_identity."""
    last = last_of_types(audit, name, (REQUESTED, APPROVED), until)
    if last is None or last["type"] != REQUESTED:
        return None
    data = document(last["data"])[1]
    return {
        "position": last["position"],
        "actor": last["actor"],
        "at": last["timestamp"],
        "require_approval": bool(data.get("require_approval")),
        "approval_identity": data.get("approval_identity") or "label",
    }
