"""What the views show of stages (DESIGN 7.10): the pipeline a config belongs to, each stage's latest revision
and artifact, and the upstream revision waiting for it; read from the history view. (What is shown, not what
is decided: a promotion decides on the upstream's own events, service/promotion.py; here an upstream row that
is Complete is taken as verified, as I9 holds it, and its Complete time is the row's finished_at.)"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from ...domain import phases, stage
from ...domain.errors import NotFound
from ...projections import history_queries
from ...projections.rows import ViewRow as Row

if TYPE_CHECKING:
    import sqlite_utils


def promoted_from(cause: str | None) -> Row | None:
    """History JSON's `promoted_from`: `{config, revision}` for a promotion, else None."""
    source = stage.promoted_from(cause)
    return None if source is None else {"config": source[0], "revision": source[1]}


def pipeline(history: sqlite_utils.Database, name: str, now: datetime) -> list[Row]:
    """The stages of `name`'s pipeline in order, each with its latest revision, phase, artifact values, the
    upstream revision it was promoted from, and the upstream revision waiting for it (`waiting`: eligible,
    or soaking with seconds left; None when nothing newer waits)."""
    specs = {row["name"]: row["spec"] for row in history_queries.configs(history)}
    ups = {n: p.upstream for n, spec in specs.items() if (p := stage.policy_of(spec)) is not None}
    downs: dict[str, list[str]] = {}
    for down, up in ups.items():
        downs.setdefault(up, []).append(down)
    order = [n for n in stage.pipeline(name, ups.get, lambda n: downs.get(n, [])) if n in specs]
    return [_stage_row(history, n, specs, downs, now) for n in order]


def pipelines(history: sqlite_utils.Database, now: datetime) -> list[list[Row]]:
    """Every pipeline of stages, each in order (as `pipeline`), by its first config's name."""
    specs = {row["name"]: row["spec"] for row in history_queries.configs(history)}
    ups = {n: p.upstream for n, spec in specs.items() if (p := stage.policy_of(spec)) is not None}
    roots = sorted({_root(n, ups) for n in ups})
    return [pipeline(history, root, now) for root in roots]


def _root(name: str, ups: dict[str, str]) -> str:
    seen = {name}
    while (up := ups.get(name)) is not None and up not in seen:
        seen.add(up)
        name = up
    return name


def _stage_row(
    history: sqlite_utils.Database,
    name: str,
    specs: dict[str, Row],
    downs: dict[str, list[str]],
    now: datetime,
) -> Row:
    policy = stage.policy_of(specs[name])
    keys = list(policy.artifact) if policy else sorted({k for d in downs.get(name, []) for k in _keys(specs[d])})
    rows = history_queries.deployments(history, name)
    latest = rows[-1] if rows else None
    env = (latest["spec"] if latest else specs[name]).get("env") or {}
    return {
        "config": name,
        "upstream": policy.upstream if policy else None,
        "promote": policy.promote if policy else None,
        "soak": policy.soak if policy else None,
        "latest_version": latest["revision"] if latest else None,
        "phase": latest["phase"] if latest else None,
        "artifact": {k: env.get(k) for k in keys},
        "promoted_from": promoted_from(latest["cause"]) if latest else None,
        "waiting": waiting(history, name, now, specs[name], rows) if policy else None,
    }


def _keys(spec: Row) -> tuple[str, ...]:
    policy = stage.policy_of(spec)
    return policy.artifact if policy else ()


def waiting(
    history: sqlite_utils.Database,
    name: str,
    now: datetime,
    spec: Row,
    rows: list[Row] | None = None,
) -> Row | None:
    """The newest upstream revision newer than any `name` was promoted from that is eligible at `now`, or
    soaks (`{version, eligible, seconds_left, why}`); None when none is."""
    policy = stage.policy_of(spec)
    if policy is None:
        return None
    rows = history_queries.deployments(history, name) if rows is None else rows
    sources = [s for r in rows if (s := stage.promoted_from(r["cause"])) is not None and s[0] == policy.upstream]
    above = max((s[1] for s in sources), default=0)
    try:
        upstream_rows = history_queries.deployments(history, policy.upstream)
    except NotFound:  # an upstream the views do not hold (yet): nothing waits
        return None
    for row in reversed(upstream_rows):
        if row["revision"] <= above:
            break
        if row["phase"] != phases.COMPLETE:
            continue
        verdict = stage.eligibility(_upstream(policy.upstream, row), policy, now)
        if verdict.eligible or verdict.seconds_left is not None:
            left = None if verdict.seconds_left is None else round(verdict.seconds_left, 1)
            return {"version": row["revision"], "eligible": verdict.eligible, "seconds_left": left, "why": verdict.why}
    return None


def _upstream(config: str, row: Row) -> stage.UpstreamRevision:
    """An upstream revision as its history row shows it (Complete: verified, by I9; Complete since finished_at)."""
    complete = row["phase"] == phases.COMPLETE and row["finished_at"] is not None
    found = stage.UpstreamRevision(config, row["revision"], row["phase"], str(row["cause"] or ""))
    found.env = dict(row["spec"].get("env") or {})
    found.completed_at = datetime.fromisoformat(row["finished_at"]) if complete else None
    found.verified = complete
    return found


def queued_text(rows: list[Row]) -> str:
    """`; queued behind version V` when the latest revision waits in New behind an open one (--queue)."""
    latest = rows[-1] if rows else None
    if latest is None or latest["phase"] != phases.NEW:
        return ""
    ahead = [r["revision"] for r in rows[:-1] if r["phase"] in phases.OPEN]
    return f"; queued behind version {ahead[-1]}" if ahead else ""


def upstream_text(history: sqlite_utils.Database, name: str, rows: list[Row], now: datetime) -> str:
    """For a stage, what waits upstream: `; upstream U version N soaking, S s left`, or that it is eligible."""
    specs = history_queries.configs(history, name)
    spec = specs[0]["spec"] if specs else {}
    policy = stage.policy_of(spec)
    wait = waiting(history, name, now, spec, rows)
    if wait is None or policy is None:
        return ""
    if wait["eligible"]:
        how = "the controller promotes it" if policy.auto else f"rollouts rollout latest {name}"
        return f"; upstream {policy.upstream} version {wait['version']} is eligible ({how})"
    return f"; upstream {policy.upstream} version {wait['version']} soaking, {wait['seconds_left']:.0f}s left"
