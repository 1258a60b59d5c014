"""Decisions of DESIGN 7.10 on aggregates: the queue (a new revision that waits, never cancels) and a
stage's promotion of an upstream revision (one atomic save each)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate

from . import phases
from .config import DeploymentConfig
from .deployment import Deployment
from .errors import DomainError
from .meta import Meta
from .rollout import settle, trigger
from .stage import AUTOMATIC, StagePolicy, UpstreamRevision, eligibility, promoted_spec, promotion_cause


def waiting(config: DeploymentConfig, open_deployments: Sequence[Deployment]) -> list[Deployment]:
    """The queued ones: every open deployment but the oldest (which runs, or is next to)."""
    oldest = min(config.open_revisions, default=None)
    return [d for d in open_deployments if d.revision != oldest and d.phase == phases.NEW]


def enqueue(
    config: DeploymentConfig,
    open_deployments: Sequence[Deployment],
    *,
    cause: str,
    message: str | None,
    meta: Meta,
    spec: dict[str, Any] | None = None,
) -> list[Aggregate]:
    """`--queue`: the next revision waits in New behind the open ones, which go on (no cancel); at most one
    waits: the one queued before is superseded by it (Failed, reason `superseded by V`). With nothing open it
    is a plain trigger. Refused while paused, as any rollout."""
    if not config.open_revisions:
        return trigger(config, [], cause=cause, message=message, supersede=False, meta=meta, spec=spec)
    config.check_can_roll_out(supersede=True)  # (the pause)
    queued = waiting(config, open_deployments)
    for older in queued:
        older.supersede(config.latest_revision + 1, meta)
        settle(config, older, meta)
    # The open ones are not cancelled: as --supersede would, but asking nothing of them.
    return [*trigger(config, [], cause=cause, message=message, supersede=True, meta=meta, spec=spec), *queued]


def promoted_upto(config: DeploymentConfig, upstream: str) -> int:
    """The newest revision of `upstream` this stage was ever promoted from (0: none)."""
    return (config.promoted or {}).get(upstream, 0)


def promote(
    config: DeploymentConfig,
    open_deployments: Sequence[Deployment],
    upstream: UpstreamRevision,
    policy: StagePolicy,
    now: datetime,
    meta: Meta,
    *,
    queue: bool,
    automatic: bool = False,
    message: str | None = None,
) -> list[Aggregate]:
    """Roll out `upstream`'s artifact on the stage `config` (I11): refused unless it is eligible at `now`;
    `automatic` (the controller, for an auto stage) only for a revision newer than any promoted before (once
    each). The stage's spec takes the artifact (as undo sets a spec back, so a rollback restores the one
    before), and the new revision is triggered, queued behind the open ones or refused while one is open."""
    verdict = eligibility(upstream, policy, now)
    if not verdict.eligible:
        raise DomainError(f"cannot promote to {config.name}: {verdict.why}")
    if automatic and upstream.revision <= promoted_upto(config, policy.upstream):
        raise DomainError(f"{config.name} was promoted from revision {upstream.revision} of {policy.upstream} already")
    if not queue:
        config.check_can_roll_out(supersedable=False)
    config.change_spec(promoted_spec(config.spec, upstream, policy), meta)
    cause = promotion_cause(policy.upstream, upstream.revision)
    message = AUTOMATIC if automatic and message is None else message  # what I11's audit tells them by
    return enqueue(config, open_deployments, cause=cause, message=message, meta=meta)
