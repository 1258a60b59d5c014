"""Reading the history view (projections/history.py): configs, deployments and their runs, as plain rows."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..domain.errors import NotFound
from ..domain.spec_defaults import STEP_DEFAULTS
from . import freezes
from .history_tables import DURATION_BUCKETS, EXACT
from .rows import ViewRow

if TYPE_CHECKING:
    import sqlite_utils


# What a deployment row holds, in the order `rollout history --revision N` prints it.
DEPLOYMENT_FIELDS = (
    "revision",
    "phase",
    "reason",
    "attempt",
    "cause",
    "message",
    "actor",
    "created_at",
    "started_at",
    "finished_at",
)
_CONFIGS = (
    "SELECT c.name, c.spec, c.paused, c.latest_revision, c.created_at, c.updated_at, d.phase"
    " FROM configs c LEFT JOIN deployments d ON d.config = c.name AND d.revision = c.latest_revision"
)
_STEPS = "SELECT * FROM steps WHERE config = ? AND revision = ? ORDER BY created_at, name"
_LATEST_PHASE = "SELECT phase FROM deployments WHERE config = ? ORDER BY revision DESC LIMIT 1"
_STEP_RUN = (
    "SELECT d.spec, s.kind FROM steps AS s JOIN deployments AS d ON d.config = s.config AND d.revision = s.revision"
    " WHERE s.name = ?"
)
_MEASURED = "SELECT * FROM measurements WHERE {} ORDER BY revision, attempt, k"
_LAST_VALUES = """SELECT m.config, last.name, m.value FROM measurements AS m JOIN (
    SELECT config, substr(template, 1, instr(template, '@') - 1) AS name, max(position) AS position
    FROM measurements WHERE template IS NOT NULL AND value IS NOT NULL GROUP BY config, name
) AS last ON last.config = m.config AND last.position = m.position ORDER BY m.config, last.name"""


def configs(db: sqlite_utils.Database, name: str | None = None, now: datetime | None = None) -> list[ViewRow]:
    """Every config (or only `name`) with its spec decoded, its paused flag, its latest deployment's phase,
    and the freezes in force at `now` (`frozen`, `freezes`: none without `now`)."""
    sql = _CONFIGS + (" WHERE c.name = ?" if name else "") + " ORDER BY c.name"
    rows = list(db.query(sql, [name] if name else []))
    recorded = freezes.recorded(db) if now is not None else {}
    for row in rows:
        row["freezes"] = freezes.in_force_for(row["name"], recorded, now) if now is not None else []
        row["frozen"] = bool(row["freezes"])
        row["spec"] = json.loads(row["spec"])
        row["spec"].setdefault("pass_env", [])  # left out of the stored spec when empty
        row["spec"].setdefault("require_approval", False)  # left out when off
        row["spec"].setdefault("approval_identity", "label")  # left out at its default
        for key, default in STEP_DEFAULTS.items():  # the fields of 7.6: left out at their defaults
            row["spec"].setdefault(key, default)
        row["paused"] = bool(row["paused"])
        row["latest_phase"] = row.pop("phase")
    return rows


def config_names(db: sqlite_utils.Database) -> list[str]:
    """Every config's name, in order."""
    return [name for (name,) in db.execute("SELECT name FROM configs ORDER BY name")]


def deployments(db: sqlite_utils.Database, name: str, revision: int | None = None) -> list[ViewRow]:
    """`name`'s deployments in revision order (or only `revision`, with its runs as `steps`).

    NotFound when there is no such config, or no such revision of it."""
    if not db.execute("SELECT 1 FROM configs WHERE name = ?", (name,)).fetchone():
        raise NotFound(f"config {name!r} not found")
    where, args = ("config = ?", [name]) if revision is None else ("config = ? AND revision = ?", [name, revision])
    rows = list(db.query(f"SELECT * FROM deployments WHERE {where} ORDER BY revision", args))
    if revision is not None and not rows:
        raise NotFound(f"config {name!r} has no revision {revision}")
    measured = _measurements(db, where, args)
    for row in rows:
        row["spec"] = json.loads(row["spec"])
        row["needs_approval"] = bool(row["needs_approval"])
        row["measurements"] = measured.get((row["revision"], row["attempt"]), [])
        if revision is not None:
            row["steps"] = list(db.query(_STEPS, [name, revision]))
    return rows


def _measurements(db: sqlite_utils.Database, where: str, args: list[Any]) -> dict[tuple[int, int], list[ViewRow]]:
    """Each attempt's measurements (7.9: k, step, template, outcome, value, error), by (revision, attempt)."""
    found: dict[tuple[int, int], list[ViewRow]] = {}
    for m in db.query(_MEASURED.format(where), args):
        value = None if m["value"] is None else json.loads(m["value"])
        shown = {"k": m["k"], "step": m["step"], "template": m["template"], "outcome": m["outcome"]}
        found.setdefault((m["revision"], m["attempt"]), []).append({**shown, "value": value, "error": m["error"]})
    return found


def last_values(db: sqlite_utils.Database) -> list[tuple[str, str, float]]:
    """(config, template, value) of each template's last numeric value, whatever its revision (7.9: /metrics)."""
    found = []
    for config, template, text in db.execute(_LAST_VALUES):
        value = json.loads(text)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append((config, template, float(value)))
    return found


def latest_phase(db: sqlite_utils.Database, name: str) -> str | None:
    """The phase of `name`'s latest deployment (None when it has none, or there is no such config)."""
    row = db.execute(_LATEST_PHASE, (name,)).fetchone()
    return row[0] if row else None


def step_run(db: sqlite_utils.Database, name: str) -> tuple[str, str] | None:
    """(spec, kind) of the step whose run is named `name`: its deployment's spec and the step's kind (None:
    no step of the view has that name)."""
    row: tuple[str, str] | None = db.execute(_STEP_RUN, (name,)).fetchone()
    return row


# -- what /metrics reports (adapters/web/metrics.py, adapters/web/exposition.py) --------------------

# The history view keeps these sums by config (history.PHASE_COUNTS, VERIFICATION_COUNTS, FINISHED): reading
# them is reading a row or a few per config, not every deployment nor every end.
_PHASE_COUNTS = "SELECT config, phase, n FROM phase_counts WHERE n > 0{} ORDER BY config, phase"
_OF_CONFIGS = " AND config IN (SELECT value FROM json_each(?))"
_FINISHED = "SELECT config, complete, failed FROM finished{} ORDER BY config"
_DURATIONS = "SELECT le, count, exact FROM durations"
_CONFIGS_OF = "SELECT DISTINCT config FROM deployments WHERE stream IN (SELECT value FROM json_each(?))"


def phase_counts(db: sqlite_utils.Database, configs: Collection[str] | None = None) -> list[tuple[str, str, int]]:
    """(config, phase, how many of its deployments are in it), for every phase some deployment is in,
    in config then phase order; only of `configs` when given."""
    if configs is None:
        return db.execute(_PHASE_COUNTS.format("")).fetchall()
    if not configs:
        return []
    return db.execute(_PHASE_COUNTS.format(_OF_CONFIGS), [json.dumps(list(configs))]).fetchall()


def finished_counts(db: sqlite_utils.Database, configs: Collection[str] | None = None) -> list[tuple[str, int, int]]:
    """(config, times its deployments ended Complete, ended Failed) for each config that has had one
    end (only of `configs` when given), in config order: they only grow as the log does (a retry starts
    again after a Failed end, which stays counted)."""
    if configs is None:
        return db.execute(_FINISHED.format("")).fetchall()
    if not configs:
        return []
    return db.execute(
        _FINISHED.format(" WHERE config IN (SELECT value FROM json_each(?))"), [json.dumps(list(configs))]
    ).fetchall()


_STEP_COUNTS = (
    "SELECT config, passed, failed, inconclusive, rollbacks FROM verification_counts"
    " WHERE passed + failed + inconclusive + rollbacks > 0{} ORDER BY config"
)


def verification_counts(
    db: sqlite_utils.Database, configs: Collection[str] | None = None
) -> list[tuple[str, int, int, int, int]]:
    """(config, measurements passed, failed, inconclusive, automatic rollbacks) of each config that has had
    a measurement or a rollback (7.6); only of `configs` when given. (A measurement is counted in its
    attempt's row: a retry starts its count again.)"""
    if configs is None:
        return [tuple(r) for r in db.execute(_STEP_COUNTS.format("")).fetchall()]
    if not configs:
        return []
    rows = db.execute(_STEP_COUNTS.format(_OF_CONFIGS), [json.dumps(list(configs))]).fetchall()
    return [tuple(r) for r in rows]


def duration_buckets(db: sqlite_utils.Database) -> tuple[list[tuple[float, int]], int, float]:
    """The seconds from creation to each end of a deployment, as a histogram: (bound, ends at most
    that long) for each of DURATION_BUCKETS (cumulative), how many ends, and their seconds summed
    (the `endings` rows' seconds summed exactly, then rounded once: what math.fsum of them gives)."""
    per_bucket: dict[float | None, int] = {}
    exact = 0
    for le, n, summed in db.execute(_DURATIONS):
        per_bucket[le] = per_bucket.get(le, 0) + int(n)
        exact += int(summed)
    cumulative, running = [], 0
    for bound in DURATION_BUCKETS:
        running += per_bucket.get(bound, 0)
        cumulative.append((bound, running))
    return cumulative, sum(per_bucket.values()), exact / (1 << EXACT)  # int / int: correctly rounded


def configs_of(db: sqlite_utils.Database, streams: Collection[str]) -> set[str]:
    """The configs of the deployments whose streams are `streams` (those the view has)."""
    if not streams:
        return set()
    return {c for (c,) in db.execute(_CONFIGS_OF, [json.dumps(list(streams))])}
