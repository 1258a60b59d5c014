"""Stages' use cases (DESIGN 7.10): `rollout latest` of a stage or with `--queue`, the checks of a stage's
config, and the controller's automatic promotions; each decided on aggregates with optimistic concurrency."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...domain import ids, phases, promotion, rollout, stage
from ...domain.config import DeploymentConfig
from ...domain.errors import DomainError, NotFound, UsageError
from ...domain.meta import Meta
from ...domain.stage import StagePolicy, UpstreamRevision
from .commands import peek_config

if TYPE_CHECKING:
    from .application import RolloutsApp
    from .deciding import DecidingApp


def upstream_revision(app: DecidingApp, upstream: DeploymentConfig, revision: int) -> UpstreamRevision:
    """Revision `revision` of `upstream` as its own events say (the pure fold of domain/stage.py). A
    deployment that is not Complete is told by its aggregate alone (no need to read its events again)."""
    deployment = app.deployment(upstream, revision)
    if deployment.phase != phases.COMPLETE:
        found = UpstreamRevision(upstream.name, revision, deployment.phase, deployment.cause)
        found.reason = deployment.reason
        return found
    events = app.events.get(ids.deployment_id(upstream.id, revision))
    read = ((type(e).__name__, e.__dict__["timestamp"], e.__dict__) for e in events)  # (the protocol has no time)
    return stage.fold_upstream(upstream.name, revision, read)


def latest(
    app: RolloutsApp,
    name: str,
    message: str | None,
    meta: Meta,
    *,
    supersede: bool = False,
    queue: bool = False,
    revision: int | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """`rollout latest NAME [--queue] [--revision N]`: a config that is no stage rolls out its spec (queued
    behind the open ones with `queue`); a stage promotes its upstream's newest eligible revision (or `revision`),
    refused with the reason when none is. Returns the new revision."""
    if supersede and queue:
        raise UsageError("--queue and --supersede exclude each other: wait behind the open ones, or cancel them")

    def decision() -> tuple[list[Any], int]:
        config = app.config(name)
        policy = stage.policy_of(config.spec)
        if policy is None and revision is not None:
            raise UsageError(f"config {name} is not a stage: --revision names an upstream revision (config set --from)")
        opened = app.open_deployments(config) if supersede or queue else []
        if policy is None:
            if queue:
                return promotion.enqueue(
                    config, opened, cause="manual", message=message, meta=meta
                ), config.latest_revision
            found = rollout.trigger(config, opened, cause="manual", message=message, supersede=supersede, meta=meta)
            return found, config.latest_revision
        chosen = _chosen(app, config, policy, revision, now())
        if supersede:  # the open ones are cancelled; the promotion waits for them to end
            for older in opened:
                older.request_cancel(meta)
                rollout.settle(config, older, meta)
            aggregates = promotion.promote(config, [], chosen, policy, now(), meta, queue=True, message=message)
            return [*aggregates, *opened], config.latest_revision
        aggregates = promotion.promote(config, opened, chosen, policy, now(), meta, queue=queue, message=message)
        return aggregates, config.latest_revision

    return app.decide(decision)


def _chosen(
    app: DecidingApp, config: DeploymentConfig, policy: StagePolicy, revision: int | None, now: datetime
) -> UpstreamRevision:
    """The upstream revision a `rollout latest` of a stage promotes: `revision`, or the newest eligible one."""
    upstream = app.config(policy.upstream)
    if revision is not None:
        if not 1 <= revision <= upstream.latest_revision:
            raise NotFound(f"config {upstream.name!r} has no revision {revision}")
        return upstream_revision(app, upstream, revision)
    found, first = stage.newest_eligible(
        lambda r: upstream_revision(app, upstream, r), upstream.latest_revision, policy, now
    )
    if found is None:
        why = first.why if first is not None else f"{upstream.name} has no revision yet"
        raise DomainError(f"nothing to promote to {config.name}: {why}")
    return found  # (a Complete deployment changes no more: its read needs no guard)


def auto_promote(app: RolloutsApp, name: str, meta: Meta, now: datetime) -> int | None:
    """The controller's promotion of auto stage `name` (I11): the newest upstream revision eligible at `now`
    and newer than any promoted before, queued behind what is open. Returns the new revision (None: none was
    due, or the stage is paused: a pause applies as to any rollout). Two controllers at once: one save wins,
    the other decides again on fresh aggregates and finds the revision promoted already."""
    if _look(app, name, now) is None:
        return None

    def decision() -> tuple[list[Any], int | None]:
        config = app.config(name)
        policy = stage.policy_of(config.spec)
        if policy is None or not policy.auto or config.paused:
            return [], None
        upstream = app.config(policy.upstream)
        # An upstream revision that ends meanwhile moves its config (RolloutEnded): this save then fails and
        # is decided again, so what it promotes is the newest eligible as the log stands when it commits.
        app.guard(upstream.id, upstream.version)
        above = promotion.promoted_upto(config, policy.upstream)
        found, _ = stage.newest_eligible(
            lambda r: upstream_revision(app, upstream, r), upstream.latest_revision, policy, now, above
        )
        if found is None:
            return [], None
        opened = app.open_deployments(config)
        aggregates = promotion.promote(config, opened, found, policy, now, meta, queue=True, automatic=True)
        return aggregates, config.latest_revision

    return app.decide(decision)


def _look(app: RolloutsApp, name: str, now: datetime) -> UpstreamRevision | None:
    """A look before deciding (on the aggregates as the log has them, decided on again if it finds one): the
    revision an automatic promotion of `name` would take."""
    try:
        config = peek_config(app, name)
        policy = stage.policy_of(config.spec)
        if policy is None or not policy.auto or config.paused:
            return None
        upstream = peek_config(app, policy.upstream)
        above = promotion.promoted_upto(config, policy.upstream)
        if upstream.latest_revision <= above:
            return None
        found, _ = stage.newest_eligible(
            lambda r: upstream_revision(app, upstream, r), upstream.latest_revision, policy, now, above
        )
    except NotFound:  # an upstream not (yet) in the log
        return None
    finally:
        app.forget_reads()
    return found


__all__ = ["auto_promote", "latest", "upstream_revision"]
