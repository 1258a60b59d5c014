"""Desired deployers: per open deployment, what should run now, or that it waits for the slot."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlite_utils

from domain import phases
from projections.projection import Projection
from projections.records import Record

CREATE = """
CREATE TABLE IF NOT EXISTS open_deployments (
    stream TEXT PRIMARY KEY, config TEXT, version INTEGER, attempt INTEGER, phase TEXT,
    step TEXT, step_kind TEXT, created INTEGER, started INTEGER, cancel INTEGER,
    claimant TEXT, claimed_at TEXT, timeout INTEGER, notification_id INTEGER)
"""
COLUMNS = (
    "stream",
    "config",
    "version",
    "attempt",
    "phase",
    "step",
    "step_kind",
    "created",
    "started",
    "cancel",
    "claimant",
    "claimed_at",
    "timeout",
    "notification_id",
)
UPSERT = f"INSERT OR REPLACE INTO open_deployments VALUES ({', '.join('?' * len(COLUMNS))})"
SELECT = "SELECT * FROM open_deployments WHERE stream = ?"
STEP_MARKS = {
    "DeployerCreated": "created",
    "HookCreated": "created",
    "DeployerStarted": "started",
    "HookStarted": "started",
}


class Desired(Projection):
    """A row per deployment; the controller reads the open ones through an index on phase."""

    name = "desired"
    version = 1
    tables = ("open_deployments",)

    def create(self, db: sqlite_utils.Database) -> None:
        db.execute(CREATE)
        db.execute("CREATE INDEX IF NOT EXISTS open_phase ON open_deployments (phase)")

    def apply(self, db: sqlite_utils.Database, records: Sequence[Record]) -> None:
        touched: dict[str, dict[str, Any] | None] = {}
        for r in records:
            if r.kind != "deployment":
                continue
            if r.stream not in touched:
                touched[r.stream] = _load(db, r.stream)
            touched[r.stream] = fold(touched[r.stream], r)
        rows = [tuple(row[c] for c in COLUMNS) for row in touched.values() if row]
        db.conn.executemany(UPSERT, rows)


def _load(db: sqlite_utils.Database, stream: str) -> dict[str, Any] | None:
    cursor = db.execute(SELECT, (stream,))
    row = cursor.fetchone()
    return dict(zip(COLUMNS, row, strict=True)) if row else None


def fold(row: dict[str, Any] | None, r: Record) -> dict[str, Any] | None:
    """The deployment's row after `r`."""
    if r.type == "Created":
        return {
            "stream": r.stream,
            "config": r.data["config"],
            "version": r.data["revision"],
            "attempt": 1,
            "phase": phases.NEW,
            "step": None,
            "step_kind": None,
            "created": 0,
            "started": 0,
            "cancel": 0,
            "claimant": None,
            "claimed_at": None,
            "timeout": r.data["spec"]["timeout"],
            "notification_id": None,
        }
    if row is None:
        return None
    row = {**row, "phase": phases.phase_after(row["phase"], r.type, r.data), "notification_id": r.position}
    if r.type == "DeployerClaimed":
        row.update(claimant=r.data["claimant"], claimed_at=r.timestamp, attempt=r.data["attempt"])
        _enter(row, r.data["step"])
    elif r.type in ("DeployerSucceeded", "HookSucceeded", "HookFailed"):
        _enter(row, r.data.get("next"))
    elif r.type in STEP_MARKS:
        row[STEP_MARKS[r.type]] = 1
        row["created"] = 1
    elif r.type == "CancelRequested":
        row["cancel"] = 1
    elif r.type == "RetryRequested":
        row.update(attempt=r.data["attempt"], cancel=0, claimant=None, claimed_at=None)
        _enter(row, None)
    return row


def _enter(row: dict[str, Any], step: dict[str, Any] | None) -> None:
    row.update(step=step and step["name"], step_kind=step and step["kind"], created=0, started=0)
