"""Desired deployers: per open deployment, what should run now, or that it waits for the slot."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain import phases
from . import freezes, stages
from .projection import Fold, Projection, StatementSink
from .records import Record
from .rows import Table

if TYPE_CHECKING:
    import sqlite_utils

CREATE = """
CREATE TABLE IF NOT EXISTS open_deployments (
    stream TEXT PRIMARY KEY, config TEXT, revision INTEGER, attempt INTEGER, phase TEXT,
    step TEXT, step_kind TEXT, created INTEGER, started INTEGER, cancel INTEGER,
    claimant TEXT, claimed_at TEXT, timeout INTEGER, notification_id INTEGER, approval INTEGER,
    step_at TEXT, step_delay INTEGER, held REAL, verify_timeout INTEGER)
"""
COLUMNS = (
    "stream",
    "config",
    "revision",
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
    "approval",  # 1: the attempt waits for `rollout approve`
    # 7.6: when the step became current (a measurement: when it was created), the seconds after that it is
    # due (NULL: a pause that waits for a human), the seconds the attempt was paused for a human before
    # (not counted toward --timeout), and how long a measurement may run.
    "step_at",
    "step_delay",
    "held",
    "verify_timeout",
)
STEP_MARKS = {
    "DeployerCreated": "created",
    "HookCreated": "created",
    "MeasurementCreated": "created",
    "StepPaused": "created",
    "DeployerStarted": "started",
    "HookStarted": "started",
    "MeasurementStarted": "started",
}
# What the controller plans from each pass (adapters/controller/loop.py): every open deployment, through the
# index on phase.
OPEN_ROWS = "SELECT * FROM open_deployments WHERE phase IN ('New', 'Pending', 'Running') ORDER BY config, revision"
# The events that end a step and name the next (their `next`)
MOVES = ("DeployerSucceeded", "HookSucceeded", "HookFailed", "MeasurementRecorded", "PauseEnded", "Promoted")

# Events whose row change follows from their type alone (see _advance and phases.phase_after)
_NO_DATA = frozenset(
    {*STEP_MARKS, "CancelRequested", "Cancelled", "DeployerFailed", "DeployerLost", "Approved", "Unfrozen", "Aborted"}
)


class Desired(Projection):
    """A row per deployment; the controller reads the open ones through an index on phase. And the freezes."""

    name = "desired"
    # 2: approvals and freezes. 3: steps, measurements and pauses (7.6). 4: the deployment number is
    # `revision`, as in the events (was `version`). 5: the stages (7.10). 6: the index of the auto stages.
    version = 6
    tables = ("open_deployments", "freezes", "stages")

    def create(self, db: sqlite_utils.Database) -> None:
        db.execute(CREATE)
        freezes.create(db)
        stages.create_table(db)
        db.execute("CREATE INDEX IF NOT EXISTS open_phase ON open_deployments (phase)")

    def fold(self, conn: StatementSink) -> DesiredFold:
        return DesiredFold(conn)


class DesiredFold(Fold):
    def __init__(self, conn: StatementSink) -> None:
        self.table = Table(conn, "open_deployments", COLUMNS, "stream")
        self.freezes = freezes.FreezeTable(conn)
        self.stages = stages.StageTable(conn)

    def from_zero(self) -> None:
        self.table.from_zero()
        self.stages.from_zero()

    def wants(self, kind: str, type_: str) -> bool:
        return kind == "deployment" or freezes.wants(kind, type_) or stages.wants(kind, type_)

    def needs_data(self, kind: str, type_: str) -> bool:
        return type_ not in _NO_DATA

    def apply(self, records: Sequence[Record]) -> None:
        table = self.table
        changed = table.changed
        for r in records:
            if r.kind != "deployment":
                if freezes.wants(r.kind, r.type):
                    self.freezes.apply(r)
                elif stages.wants(r.kind, r.type):
                    self.stages.apply(r)
                continue
            if r.type == "Created":
                table.put(_created(r))
                continue
            row = table.get(r.stream)
            if row is not None:
                _advance(row, r)
                changed[r.stream] = row

    def flush(self) -> None:
        self.table.flush()
        self.freezes.flush()
        self.stages.flush()


def fold(row: dict[str, Any] | None, r: Record) -> dict[str, Any] | None:
    """The deployment's row after `r`."""
    if r.type == "Created":
        return _created(r)
    if row is None:
        return None
    row = dict(row)
    _advance(row, r)
    return row


def _created(r: Record) -> dict[str, Any]:
    return {
        "stream": r.stream,
        "config": r.data["config"],
        "revision": r.data["revision"],
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
        "approval": 1 if r.data["spec"].get("require_approval") else 0,
        "step_at": None,
        "step_delay": 0,
        "held": 0.0,
        "verify_timeout": r.data["spec"].get("verify_timeout", 30),
    }


def _advance(row: dict[str, Any], r: Record) -> None:
    """Change `row` to the deployment's row after `r` (not Created)."""
    row["phase"] = phases.phase_after(row["phase"], r.type, r.data)
    row["notification_id"] = r.position
    if r.type == "DeployerClaimed":
        row.update(claimant=r.data["claimant"], claimed_at=r.timestamp, attempt=r.data["attempt"], held=0.0)
        _enter(row, r.data["step"], r.timestamp)
    elif r.type in MOVES:
        if r.type in ("PauseEnded", "Promoted") and row["step_delay"] is None and row["step_at"]:
            row["held"] = (row["held"] or 0.0) + _seconds(row["step_at"], r.timestamp)
        _enter(row, r.data.get("next"), r.timestamp)
    elif r.type in STEP_MARKS:
        row[STEP_MARKS[r.type]] = 1
        row["created"] = 1
        if r.type == "MeasurementCreated":
            row["step_at"] = r.timestamp  # a measurement's --verify-timeout runs from its creation
    elif r.type in ("CancelRequested", "AbortRequested"):
        row["cancel"] = 1
    elif r.type == "RetryRequested":
        row.update(attempt=r.data["attempt"], cancel=0, claimant=None, claimed_at=None)
        row["approval"] = 1 if r.data.get("needs_approval") else 0
        _enter(row, None)
    elif r.type == "Approved":
        row["approval"] = 0
    elif r.type == "ClaimTaken":
        row["claimant"] = r.data["claimant"]


def _enter(row: dict[str, Any], step: dict[str, Any] | None, at: str | None = None) -> None:
    delay = step.get("delay", 0) if step else 0
    row.update(step=step and step["name"], step_kind=step and step["kind"], created=0, started=0)
    row.update(step_at=at, step_delay=delay)


def _seconds(start: str, end: str) -> float:
    return max(0.0, (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds())
