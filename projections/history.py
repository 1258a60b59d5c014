"""Rollout history: configs, a row per deployment, and a row per deployer or hook run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlite_utils

from domain import phases
from projections.projection import Projection
from projections.records import Record

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS configs (stream TEXT PRIMARY KEY, name TEXT UNIQUE, spec TEXT,
       paused INTEGER, latest_version INTEGER, created_at TEXT, updated_at TEXT)""",
    """CREATE TABLE IF NOT EXISTS deployments (stream TEXT PRIMARY KEY, config TEXT, version INTEGER,
       phase TEXT, reason TEXT, attempt INTEGER, cause TEXT, message TEXT, actor TEXT, step TEXT,
       created_at TEXT, started_at TEXT, finished_at TEXT, spec TEXT)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS deployments_config ON deployments (config, version)",
    """CREATE TABLE IF NOT EXISTS steps (name TEXT PRIMARY KEY, config TEXT, version INTEGER,
       attempt INTEGER, kind TEXT, try INTEGER, state TEXT, exit_code INTEGER, reason TEXT,
       created_at TEXT, started_at TEXT, finished_at TEXT)""",
    "CREATE INDEX IF NOT EXISTS steps_config ON steps (config, version)",
)
COLUMNS = {
    "configs": ("stream", "name", "spec", "paused", "latest_version", "created_at", "updated_at"),
    "deployments": (
        "stream",
        "config",
        "version",
        "phase",
        "reason",
        "attempt",
        "cause",
        "message",
        "actor",
        "step",
        "created_at",
        "started_at",
        "finished_at",
        "spec",
    ),
    "steps": (
        "name",
        "config",
        "version",
        "attempt",
        "kind",
        "try",
        "state",
        "exit_code",
        "reason",
        "created_at",
        "started_at",
        "finished_at",
    ),
}
KEYS = {"configs": "stream", "deployments": "stream", "steps": "name"}
STEP_STATE = {
    "DeployerCreated": "created",
    "HookCreated": "created",
    "DeployerStarted": "running",
    "HookStarted": "running",
    "DeployerSucceeded": "succeeded",
    "HookSucceeded": "succeeded",
    "DeployerFailed": "failed",
    "HookFailed": "failed",
    "DeployerLost": "lost",
    "Cancelled": "cancelled",
}


class Rows:
    """Rows touched in one batch, loaded on first use and written back once."""

    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db
        self.cache: dict[str, dict[str, dict[str, Any] | None]] = {t: {} for t in COLUMNS}

    def get(self, table: str, key: str) -> dict[str, Any] | None:
        cached = self.cache[table]
        if key not in cached:
            cursor = self.db.execute(f"SELECT * FROM {table} WHERE {KEYS[table]} = ?", (key,))
            row = cursor.fetchone()
            cached[key] = dict(zip([c[0] for c in cursor.description], row, strict=True)) if row else None
        return cached[key]

    def put(self, table: str, row: dict[str, Any]) -> None:
        self.cache[table][row[KEYS[table]]] = row

    def flush(self) -> None:
        for table, rows in self.cache.items():
            columns = COLUMNS[table]
            sql = f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
            self.db.conn.executemany(sql, [tuple(r[c] for c in columns) for r in rows.values() if r])


class History(Projection):
    name = "history"
    version = 1
    tables = ("configs", "deployments", "steps")

    def create(self, db: sqlite_utils.Database) -> None:
        for statement in SCHEMA:
            db.execute(statement)

    def apply(self, db: sqlite_utils.Database, records: Sequence[Record]) -> None:
        rows = Rows(db)
        for r in records:
            if r.kind == "config":
                _config(rows, r)
            else:
                _deployment(rows, r)
        rows.flush()


def _config(rows: Rows, r: Record) -> None:
    if r.type == "Registered":
        rows.put(
            "configs",
            {
                "stream": r.stream,
                "name": r.data["name"],
                "spec": json.dumps(r.data["spec"]),
                "paused": 0,
                "latest_version": 0,
                "created_at": r.timestamp,
                "updated_at": r.timestamp,
            },
        )
        return
    row = rows.get("configs", r.stream)
    if row is None:
        return
    if r.type == "SpecChanged":
        row["spec"] = json.dumps(r.data["spec"])
    elif r.type in ("Paused", "Resumed"):
        row["paused"] = int(r.type == "Paused")
    elif r.type == "RolloutTriggered":
        row["latest_version"] = r.data["revision"]
    else:
        return
    row["updated_at"] = r.timestamp


def _deployment(rows: Rows, r: Record) -> None:
    if r.type == "Created":
        rows.put(
            "deployments",
            {
                "stream": r.stream,
                "config": r.data["config"],
                "version": r.data["revision"],
                "phase": phases.NEW,
                "reason": None,
                "attempt": 1,
                "cause": r.data["cause"],
                "message": r.data["message"],
                "actor": r.meta.get("actor"),
                "step": None,
                "created_at": r.timestamp,
                "started_at": None,
                "finished_at": None,
                "spec": json.dumps(r.data["spec"]),
            },
        )
        return
    row = rows.get("deployments", r.stream)
    if row is None:
        return
    _step(rows, row, r)
    before, row["phase"] = row["phase"], phases.phase_after(row["phase"], r.type, r.data)
    if r.type == "RetryRequested":
        row.update(attempt=r.data["attempt"], reason=None, started_at=None, finished_at=None)
    if r.type == "DeployerStarted" and not row["started_at"]:
        row["started_at"] = r.timestamp
    if row["phase"] in phases.TERMINAL and before not in phases.TERMINAL:
        row["finished_at"] = r.timestamp
        if row["phase"] == phases.FAILED:
            row["reason"] = "cancelled" if r.type in ("Cancelled", "CancelRequested") else r.data.get("reason")


def _step(rows: Rows, deployment: dict[str, Any], r: Record) -> None:
    """Follow the deployer and hook runs of the current attempt."""
    current = rows.get("steps", deployment["step"]) if deployment["step"] else None
    state = STEP_STATE.get(r.type)
    if current is not None and state:
        current["state"] = state
        if state == "running":
            current["started_at"] = r.timestamp
        elif state != "created":
            current.update(finished_at=r.timestamp, exit_code=r.data.get("exit_code"))
            current["reason"] = r.data.get("reason")
    nxt = r.data.get("step") if r.type == "DeployerClaimed" else r.data.get("next")
    if r.type in ("DeployerClaimed", "DeployerSucceeded", "HookSucceeded", "HookFailed"):
        deployment["step"] = nxt and nxt["name"]
    if r.type in STEP_STATE and state not in ("created", "running") and not nxt:
        deployment["step"] = None
    if nxt:
        rows.put(
            "steps",
            {
                "name": nxt["name"],
                "config": deployment["config"],
                "version": deployment["version"],
                "attempt": r.data["attempt"],
                "kind": nxt["kind"],
                "try": nxt["try"],
                "state": "waiting",
                "exit_code": None,
                "reason": None,
                "created_at": r.timestamp,
                "started_at": None,
                "finished_at": None,
            },
        )
