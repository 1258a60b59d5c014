"""Decisions that change a config and its deployments together (one atomic save)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate

from domain import freeze as freezes
from domain.config import DeploymentConfig
from domain.deployment import Deployment
from domain.errors import DomainError
from domain.freeze import Freeze

Meta = dict[str, Any]


def settle(config: DeploymentConfig, deployment: Deployment, meta: Meta) -> None:
    """Release the slot together with a deployment's terminal event."""
    if deployment.is_terminal:
        config.end(deployment.revision, deployment.attempt, deployment.phase, meta)


def trigger(
    config: DeploymentConfig,
    open_deployments: Sequence[Deployment],
    *,
    cause: str,
    message: str | None,
    supersede: bool,
    meta: Meta,
) -> list[Aggregate]:
    """Open the next revision; with `supersede`, ask every open one to cancel."""
    revision = config.trigger(cause, message, supersede, meta)
    for older in open_deployments:
        older.request_cancel(meta)
        settle(config, older, meta)
    new = Deployment(
        config_id=config.id,
        config=config.name,
        revision=revision,
        spec=config.spec,
        cause=cause,
        message=message,
        meta=meta,
    )
    return [config, *open_deployments, new]


def cancel(config: DeploymentConfig, open_deployments: Sequence[Deployment], meta: Meta) -> list[Aggregate]:
    if not open_deployments:
        raise DomainError(f"config {config.name} has no rollout in progress to cancel")
    for deployment in open_deployments:
        deployment.request_cancel(meta)
        settle(config, deployment, meta)
    return [config, *open_deployments]


def retry(config: DeploymentConfig, deployment: Deployment, meta: Meta) -> list[Aggregate]:
    if deployment.revision != config.latest_revision:
        raise DomainError(f"only the latest revision ({config.latest_revision}) can be retried")
    deployment.retry(meta, needs_approval=bool(config.spec.get("require_approval")))
    config.reopen(deployment.revision, deployment.attempt, meta)
    return [config, deployment]


def claim(
    config: DeploymentConfig,
    deployment: Deployment,
    claimant: str,
    meta: Meta,
    *,
    freeze_all: Freeze | None = None,
    now: datetime | None = None,
) -> list[Aggregate]:
    """Give `deployment` the config's deployer slot (I2), checked on fresh aggregates: refused while a
    freeze of the config (or of all, `freeze_all`) is in force at `now`, or an approval is missing."""
    if not claimant:  # every host's: each would take the claim for its own
        raise DomainError(f"a claim of revision {deployment.revision} of {config.name} names no claimant")
    if now is not None:
        freezes.check_claimable(config.name, [("config", config.freeze), ("all", freeze_all)], now)
    config.check_can_claim(deployment.revision)
    deployment.claim(claimant, meta)
    config.claim_slot(deployment.revision, deployment.attempt, claimant, meta)
    return [config, deployment]
