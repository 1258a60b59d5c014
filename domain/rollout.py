"""Decisions that change a config and its deployments together (one atomic save)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate

from . import approval
from . import freeze as freezes
from .config import DeploymentConfig
from .deployment import Deployment
from .errors import DomainError
from .freeze import Freeze
from .meta import Meta
from .reasons import ABORTED, AUTO_ROLLBACK, CANCELLED, FOREIGN


def settle(config: DeploymentConfig, deployment: Deployment, meta: Meta) -> None:
    """Release the slot together with a deployment's terminal event."""
    if deployment.is_terminal:
        config.end(deployment.revision, deployment.attempt, deployment.phase, meta)


def rollback_due(config: DeploymentConfig, deployment: Deployment, last_complete: int | None = None) -> int | None:
    """The revision an automatic rollback of `deployment` restores, if its failure calls for one (DESIGN
    7.6): the config's latest deployment failed for any reason but a cancel, its config's policy says so
    (an abort always does), it is not itself an automatic rollback, none was triggered for it yet, and a
    revision before it ended Complete. Decided at the moment of failure, in the save that records it.
    `last_complete`: that revision as the caller found it, for a config restored from a snapshot taken
    before configs kept it."""
    if deployment.phase != "Failed" or deployment.revision != config.latest_revision:
        return None
    reason = deployment.reason or ""
    if reason == CANCELLED or FOREIGN in reason or deployment.is_auto_rollback:
        return None
    if not (config.spec.get("auto_rollback") or reason.startswith(ABORTED)):
        return None
    if deployment.revision in config.rolled_back:
        return None
    to = config.last_complete if config.last_complete is not None else last_complete
    return to if to is not None and to < deployment.revision else None


def restored_revision(deployment: Deployment) -> int | None:
    """The revision whose spec an automatic rollback restored (its cause names it); None for any other."""
    if not deployment.is_auto_rollback:
        return None
    named = deployment.cause.removeprefix(AUTO_ROLLBACK).strip()
    return int(named) if named.isascii() and named.isdigit() else None


def auto_rollback(
    config: DeploymentConfig, failed: Deployment, source: Deployment, spec: dict[str, Any], meta: Meta
) -> list[Aggregate]:
    """The one automatic rollback of `failed` to `source`: the config's spec set back to `spec` (source's
    rollout part over the config's policies, as `undo` stores it), and a new revision that runs it as one step."""
    config.record_rollback(failed.revision, source.revision, failed.reason or "", meta)
    config.change_spec(spec, meta)
    # One step, and no approval: it restores a spec that ran (DESIGN 7.6).
    unused = ("steps", "step_pause", "require_approval", "approval_identity")
    one_step = {k: v for k, v in config.spec.items() if k not in unused}
    cause = f"{AUTO_ROLLBACK} {source.revision}"
    message = f"version {failed.revision} failed: {failed.reason}"
    return trigger(config, [], cause=cause, message=message, supersede=False, meta=meta, spec=one_step, automatic=True)


def set_back(config: DeploymentConfig, spec: dict[str, Any], meta: Meta) -> list[Aggregate]:
    """What a failure that calls for a rollback asks when no deployer of it was ever claimed (7.11): nothing
    ran that needs undoing, so no rollback deployment; the config's spec is set back to `spec` (as
    auto_rollback would), so that the next rollout does not bring the failed spec again unasked."""
    if spec == config.spec:
        return []
    config.change_spec(spec, meta)
    return [config]


def trigger(
    config: DeploymentConfig,
    open_deployments: Sequence[Deployment],
    *,
    cause: str,
    message: str | None,
    supersede: bool,
    meta: Meta,
    spec: dict[str, Any] | None = None,
    automatic: bool = False,
) -> list[Aggregate]:
    """Open the next revision; with `supersede`, ask every open one to cancel. `spec`: the new deployment's,
    when not the config's."""
    _check_request(spec if spec is not None else config.spec, meta, f"a new revision of {config.name}")
    revision = config.trigger(cause, message, supersede, meta, automatic=automatic)
    for older in open_deployments:
        older.request_cancel(meta)
        settle(config, older, meta)
    new = Deployment(
        config_id=config.id,
        config=config.name,
        revision=revision,
        spec=config.spec if spec is None else spec,
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
    identity = approval.mode_of(config.spec.get("approval_identity"))
    _check_request(config.spec, meta, f"a retry of revision {deployment.revision} of {config.name}")
    deployment.retry(meta, bool(config.spec.get("require_approval")), identity)
    config.reopen(deployment.revision, deployment.attempt, meta)
    return [config, deployment]


def _check_request(spec: dict[str, Any], meta: Meta, what: str) -> None:
    """Refuse a request its approver could not be told apart from (7.11: `os` mode, no OS user recorded)."""
    mode = approval.mode_of(spec.get("approval_identity"))
    refused = approval.request_refusal(mode, bool(spec.get("require_approval")), approval.Who.of(meta), what)
    if refused is not None:
        raise DomainError(refused)


def claim(
    config: DeploymentConfig,
    deployment: Deployment,
    claimant: str,
    meta: Meta,
    *,
    freeze_all: Freeze | None = None,
    now: datetime | None = None,
    analysis: list[dict[str, Any]] | None = None,
) -> list[Aggregate]:
    """Give `deployment` the config's deployer slot (I2), checked on fresh aggregates: refused while a
    freeze of the config (or of all, `freeze_all`) is in force at `now`, or an approval is missing.
    `analysis`: the versions of its templates the attempt runs (DESIGN 7.9)."""
    if not claimant:  # every host's: each would take the claim for its own
        raise DomainError(f"a claim of revision {deployment.revision} of {config.name} names no claimant")
    if now is not None:
        freezes.check_claimable(config.name, [("config", config.freeze), ("all", freeze_all)], now)
    config.check_can_claim(deployment.revision)
    deployment.claim(claimant, meta, analysis)
    config.claim_slot(deployment.revision, deployment.attempt, claimant, meta)
    return [config, deployment]
