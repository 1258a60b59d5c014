"""The local runtime's table (`HOME/runtime/runtime.db`): its schema, its statements, and a row as
the controller sees it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .port import UNKNOWN_CLAIM as UNKNOWN_CLAIM  # rows disowned by a rebind
from .port import Observed
from .shim import writing

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS deployers (
        name TEXT PRIMARY KEY, config TEXT NOT NULL, revision INTEGER NOT NULL,
        attempt INTEGER NOT NULL, state TEXT NOT NULL, argv TEXT, env TEXT, cwd TEXT,
        creator_pid INTEGER, creator_start INTEGER, shim_pid INTEGER, shim_start INTEGER,
        pid INTEGER, pgid INTEGER, start_time INTEGER, exit_code INTEGER, reason TEXT,
        log_path TEXT, created_at TEXT NOT NULL, started_at TEXT, ended_at TEXT,
        pruned INTEGER NOT NULL DEFAULT 0, stop_deadline REAL, pass_env TEXT, claim TEXT)""",
    "CREATE INDEX IF NOT EXISTS deployers_state ON deployers (state)",
    "CREATE INDEX IF NOT EXISTS deployers_unended ON deployers (name) WHERE ended_at IS NULL",
    "CREATE TABLE IF NOT EXISTS runtime_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
HAS_DEPLOYERS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'deployers'"
# When this table was made, if it was made by a version that writes it down (older tables: no row).
BORN = "SELECT value FROM runtime_meta WHERE key = 'born'"
RECORD_BORN = "INSERT OR IGNORE INTO runtime_meta (key, value) VALUES ('born', ?)"
# Columns added after the first release, for runtime tables created before them.
ADDED_COLUMNS = {"stop_deadline": "REAL", "pass_env": "TEXT", "claim": "TEXT"}
OBSERVED = (
    "SELECT name, config, revision, attempt, state, exit_code, reason, created_at, ended_at, pruned, claim"
    " FROM deployers"
)
WHERE_ACTIVE = " WHERE state IN ('created', 'running')"
ACTIVE_ROWS = "SELECT * FROM deployers" + WHERE_ACTIVE
ORDER = " ORDER BY created_at, name"
INSERT = (
    "INSERT INTO deployers (name, config, revision, attempt, state, argv, env, pass_env, cwd,"
    " creator_pid, creator_start, log_path, created_at, claim) VALUES (:name, :config,"
    " :revision, :attempt, 'created', :argv, :env, :pass_env, :cwd, :creator_pid, :creator_start,"
    " :log_path, :created_at, :claim)"
)
TOMBSTONE = (
    "INSERT OR IGNORE INTO deployers (name, config, revision, attempt, state, reason,"
    " created_at, ended_at) VALUES (?, ?, ?, ?, 'stopped', ?, ?, ?)"
)
SHIM_SPAWNED = "UPDATE deployers SET shim_pid = ?, shim_start = ? WHERE name = ? AND shim_pid IS NULL"
LOST = (
    "UPDATE deployers SET state = 'lost', reason = ?, ended_at = ? WHERE name = ? AND state IN ('created', 'running')"
)
ENDED = "UPDATE deployers SET ended_at = ? WHERE name = ? AND ended_at IS NULL"
# Stopped or deleted, but not yet known to be gone (served by the partial index deployers_unended).
STOPPING = "SELECT * FROM deployers WHERE ended_at IS NULL AND +state IN ('stopped', 'deleted')"
# Tables from before pass_env stored each deployer's whole environment, the controller's secrets included.
FORGET_ENV = "UPDATE deployers SET env = NULL WHERE state != 'created' AND env IS NOT NULL"
PRUNE = (
    "UPDATE deployers SET pruned = 1, argv = NULL, env = NULL WHERE name = ? AND state NOT IN ('created', 'running')"
)

# The runs `audit` holds to the log (service/runtime_check.py): those made for a claim, with what they ran.
RECORDED_RUNS = (
    "SELECT name, config, revision, argv, env, pass_env, claim FROM deployers"
    " WHERE argv IS NOT NULL AND claim IS NOT NULL ORDER BY created_at, name"
)


def forget_environments(db: sqlite3.Connection) -> None:
    """Once, on a table from before pass_env: rows past their spawn need no env; their bytes are
    overwritten (secure_delete), and the write-ahead log that held them is emptied."""
    db.execute("PRAGMA secure_delete = ON")
    try:
        with writing(db):
            db.execute(FORGET_ENV)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.execute("PRAGMA secure_delete = OFF")


def observed(row: sqlite3.Row) -> Observed:
    """A row of the table as the port's Observed."""
    return Observed(**{**dict(row), "pruned": bool(row["pruned"])})


def deployer_names(db: sqlite3.Connection, prefix: str) -> list[str]:
    """The names from `prefix` on, in order, of the deployers whose tombstones the history limit has not pruned
    (shell completion's: the caller keeps those that start with `prefix`)."""
    rows = db.execute("SELECT name FROM deployers WHERE pruned = 0 AND name >= ? ORDER BY name", (prefix,))
    return [name for (name,) in rows if isinstance(name, str)]


def recorded_runs(path: Path) -> list[tuple[Any, ...]]:
    """RECORDED_RUNS of the table in `path`, read through a read-only connection of its own: none when it
    has no table yet, or one from before claims were recorded."""
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        rows: list[tuple[Any, ...]] = conn.execute(RECORDED_RUNS).fetchall()
    except sqlite3.Error:  # no table yet, or one from before claims were recorded
        return []
    finally:
        conn.close()
    return rows
