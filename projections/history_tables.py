"""The history view's tables: their schema, columns and keys, and how a row holds a spec, a duration and an
ending (the fold that fills them is projections/history.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS configs (stream TEXT PRIMARY KEY, name TEXT UNIQUE, spec TEXT,
       paused INTEGER, latest_revision INTEGER, created_at TEXT, updated_at TEXT)""",
    """CREATE TABLE IF NOT EXISTS deployments (stream TEXT PRIMARY KEY, config TEXT, revision INTEGER,
       phase TEXT, reason TEXT, attempt INTEGER, cause TEXT, message TEXT, actor TEXT, step TEXT,
       created_at TEXT, started_at TEXT, finished_at TEXT, spec TEXT, needs_approval INTEGER, approved_by TEXT,
       step_index INTEGER, step_count INTEGER, weight INTEGER, paused TEXT, passed INTEGER, failed INTEGER,
       inconclusive INTEGER, rollback_of INTEGER)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS deployments_config ON deployments (config, revision)",
    """CREATE TABLE IF NOT EXISTS endings (key TEXT PRIMARY KEY, config TEXT, outcome TEXT, le REAL,
       count INTEGER, seconds REAL)""",
    """CREATE TABLE IF NOT EXISTS steps (name TEXT PRIMARY KEY, config TEXT, revision INTEGER,
       attempt INTEGER, kind TEXT, try INTEGER, state TEXT, exit_code INTEGER, reason TEXT,
       created_at TEXT, started_at TEXT, finished_at TEXT)""",
    "CREATE INDEX IF NOT EXISTS steps_config ON steps (config, revision)",
    # Each measurement's outcome (7.6) with its template, value and error (7.9): history JSON's measurements,
    # `rollout status`'s last values, the page's charts, /metrics' last value by template.
    """CREATE TABLE IF NOT EXISTS measurements (name TEXT PRIMARY KEY, config TEXT, revision INTEGER,
       attempt INTEGER, k INTEGER, step INTEGER, template TEXT, outcome TEXT, value TEXT, error TEXT,
       position INTEGER, at TEXT)""",
    "CREATE INDEX IF NOT EXISTS measurements_config ON measurements (config, revision)",
    # /metrics' last value of each template: only templates' rows, so a log with none pays nothing
    """CREATE INDEX IF NOT EXISTS measurements_templates ON measurements (config, template, position)
       WHERE template IS NOT NULL AND value IS NOT NULL""",
    # /metrics' counts by config, kept as the deployments change: counting them from `deployments` read all
    # of it at each first scrape (1,000 configs, 100,000 deployments: most of a scrape made from nothing).
    "CREATE TABLE IF NOT EXISTS phase_counts (key TEXT PRIMARY KEY, config TEXT, phase TEXT, n INTEGER)",
    """CREATE TABLE IF NOT EXISTS verification_counts (config TEXT PRIMARY KEY, passed INTEGER, failed INTEGER,
       inconclusive INTEGER, rollbacks INTEGER)""",
    # Each config's ends by outcome, summed (the `endings` rows' counts: a scan of some 5,400 rows at 1,000 configs)
    "CREATE TABLE IF NOT EXISTS finished (config TEXT PRIMARY KEY, complete INTEGER, failed INTEGER)",
    # The ends in each duration bucket (`le`) of every config, and their seconds summed exactly (see DURATIONS)
    "CREATE TABLE IF NOT EXISTS durations (key TEXT PRIMARY KEY, le REAL, count INTEGER, exact TEXT)",
)
COLUMNS = {
    "configs": ("stream", "name", "spec", "paused", "latest_revision", "created_at", "updated_at"),
    "deployments": (
        "stream",
        "config",
        "revision",
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
        "needs_approval",  # the current attempt waits for `rollout approve` until approved_by is set
        "approved_by",
        # 7.6: the current (or last) rollout step, of how many, its weight; why the attempt is paused (step,
        # inconclusive, or NULL); its measurements by outcome; the failed revision an automatic rollback follows
        "step_index",
        "step_count",
        "weight",
        "paused",
        "passed",
        "failed",
        "inconclusive",
        "rollback_of",
    ),
    "steps": (
        "name",
        "config",
        "revision",
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
    "endings": ("key", "config", "outcome", "le", "count", "seconds"),
}
KEYS = {"configs": "stream", "deployments": "stream", "steps": "name", "endings": "key"}
MEASUREMENTS = (
    "name",
    "config",
    "revision",
    "attempt",
    "k",
    "step",
    "template",
    "outcome",
    "value",
    "error",
    "position",
    "at",
)
# A config's deployments in each phase (a row once one has been in it: n may be 0), and its deployments'
# measurements by outcome and automatic rollbacks (a row once it has a deployment): sums over `deployments`.
PHASE_COUNTS = ("key", "config", "phase", "n")
VERIFICATION_COUNTS = ("config", "passed", "failed", "inconclusive", "rollbacks")
VERIFIED = ("passed", "failed", "inconclusive")  # the deployments' columns summed in verification_counts
FINISHED = ("config", "complete", "failed")  # a config's ends (a row once it has had one)
# By duration bucket: the `endings` rows' counts summed, and their seconds summed exactly, as a whole number of
# 2**-EXACT (every finite float is one) written in decimal: exact / 2**EXACT, correctly rounded, is the
# math.fsum of the rows' seconds, whatever order they were summed in.
DURATIONS = ("key", "le", "count", "exact")
EXACT = 1074
# The upper bounds (seconds) of the buckets `endings` counts each end of a deployment in: the seconds
# from its creation to that end (a retried deployment ends more than once). None: above them all.
DURATION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


def spec_text(spec: dict[str, Any], document: str) -> str:
    """The JSON text a row keeps of a spec, read from the event `document` (the text the log stores):
    compact, by orjson (a rebuild writes one per deployment); by json what orjson does not write
    (integers past 64 bits, lone surrogates) or writes otherwise than the log holds it (orjson writes
    NaN and infinities as null: looked for only when the document has such a token, most specs have
    a null)."""
    try:
        text = orjson.dumps(spec)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(spec)
    if b"null" in text and ("NaN" in document or "Infinity" in document) and _non_finite(spec):
        return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
    return text.decode()


def _non_finite(value: object) -> bool:
    """Whether `value` is or holds a float that is NaN or infinite."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    return False


def exact(seconds: float) -> int:
    """`seconds` as a whole number of 2**-EXACT."""
    num, den = seconds.as_integer_ratio()  # den is a power of two
    return num << (EXACT + 1 - den.bit_length())


def ending_key(config: str, outcome: str, le: float | None) -> str:
    """The key of an `endings` row: a config's rows are the keys from `f"{config} "` up to `f"{config}!"`
    (a name has no space: domain/names.py)."""
    return f"{config} {outcome} {le}"


# The state a `steps` row is in after each event about its run
STEP_STATE = {
    "DeployerCreated": "created",
    "HookCreated": "created",
    "MeasurementCreated": "created",
    "DeployerStarted": "running",
    "HookStarted": "running",
    "MeasurementStarted": "running",
    "DeployerSucceeded": "succeeded",
    "HookSucceeded": "succeeded",
    "DeployerFailed": "failed",
    "HookFailed": "failed",
    "DeployerLost": "lost",
    "Cancelled": "cancelled",
    "Aborted": "cancelled",
    "PauseEnded": "ended",
    "Promoted": "promoted",
}


def measurement_row(deployment: dict[str, Any], position: int, at: str, data: dict[str, Any]) -> dict[str, Any]:
    """A `measurements` row: a measurement's outcome (7.6), with a template's value and error (7.9)."""
    value = data.get("value")
    return {
        "name": data["name"],
        "config": deployment["config"],
        "revision": deployment["revision"],
        "attempt": data["attempt"],
        "k": data["number"],
        "step": data["step"],
        "template": data.get("template"),
        "outcome": data["outcome"],
        "value": None if value is None else json.dumps(value),
        "error": data.get("error"),
        "position": position,
        "at": at,
    }
