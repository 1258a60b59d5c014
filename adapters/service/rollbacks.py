"""The automatic rollback a failure calls for (I10), decided in the very save that records the failure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventsourcing.domain import Aggregate

from ...domain import phases, rollout
from ...domain.config import DeploymentConfig
from ...domain.deployment import ABORTED, Deployment
from .deciding import config_spec_of

if TYPE_CHECKING:
    from .deciding import DecidingApp


def rollback_for(
    app: DecidingApp, config: DeploymentConfig, deployment: Deployment, meta: dict[str, object]
) -> list[Aggregate]:
    """The aggregates of the automatic rollback `deployment`'s failure calls for (none if it calls for none),
    decided on the config and deployment as this decision holds them."""
    to = rollout.rollback_due(config, deployment, _last_complete(app, config, deployment))
    if to is None:
        return []

    source = app.deployment(config, to)
    restored = app.spec_source(config, source).typed_spec().rollout_part()
    spec = config_spec_of({**config.spec, **restored}).to_data()  # as undo stores it
    if not deployment.deployer_claimed:  # nothing of it ran: no rollback deployment (7.11)
        return rollout.set_back(config, spec, meta)
    return rollout.auto_rollback(config, deployment, source, spec, meta)


def _last_complete(app: DecidingApp, config: DeploymentConfig, deployment: Deployment) -> int | None:
    """The last Complete revision before a failed one, looked up only when the config does not know it
    (a snapshot taken before configs kept it) and only for a failure that may call for a rollback."""
    if config.last_complete is not None or not deployment.reason or deployment.phase != phases.FAILED:
        return None
    if not (config.spec.get("auto_rollback") or deployment.reason.startswith(ABORTED)):
        return None
    for revision in range(deployment.revision - 1, 0, -1):
        if app.deployment(config, revision).phase == phases.COMPLETE:
            return revision
    return None
