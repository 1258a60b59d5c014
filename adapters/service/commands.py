"""The controller's writes: each re-decided on fresh aggregates from the log (I4)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError, OperationalError

from ...domain import ids, phases, rollout
from ...domain.config import DeploymentConfig
from ...domain.deployment import Deployment
from ...domain.errors import DomainError, NotFound
from ..store.failures import is_lock_timeout
from .rollbacks import rollback_for

if TYPE_CHECKING:
    from .application import RolloutsApp

Report = Callable[[Deployment], bool]
# A decision to make on fresh aggregates: what to save (aggregates, events) and the answer (app.decide).
Decider = Callable[[], tuple[list[Any], Any]]


def claim(app: RolloutsApp, config_name: str, revision: int, claimant: str, meta: dict[str, Any]) -> str | None:
    """Claim the slot for `revision` and return the first deployer's name; None when not due."""
    if not is_new(app, config_name, revision):
        return None  # claimed meanwhile (by a twin controller, most often): no need to decide
    return app.decide(claim_decision(app, config_name, revision, claimant, meta))


def claim_decision(app: RolloutsApp, config_name: str, revision: int, claimant: str, meta: dict[str, Any]) -> Decider:
    from . import analysis_claim  # start-up cost: templates load where deployments are claimed, not in every command

    def decision() -> tuple[list[Any], str | None]:
        config = app.config(config_name)
        deployment = app.deployment(config, revision)
        every = app.guarded_freeze_all()
        fixed = analysis_claim.fixed_at_claim(app, deployment.spec.get("analysis") or ())
        try:  # frozen or unapproved, as the log says now, whatever the plan's view said: not claimed
            aggregates = rollout.claim(
                config,
                deployment,
                claimant,
                meta,
                freeze_all=every.freeze if every else None,
                now=datetime.now(UTC),
                analysis=fixed,
            )
        except DomainError:
            return [], None
        return aggregates, deployment.step.name if deployment.step else None

    return decision


def is_new(app: RolloutsApp, config_name: str, revision: int) -> bool:
    """Whether the deployment is still New in the log (a cheap look, before deciding to claim it)."""
    return peek(app, ids.deployment_id(ids.config_id(config_name), revision)).phase == phases.NEW


def report(
    app: RolloutsApp, config_name: str, revision: int, change: Report, meta: dict[str, Any]
) -> Deployment | None:
    """Apply `change` to the deployment; a terminal outcome releases the slot in the same save.

    Returns the changed deployment, or None when `change` found nothing to record.
    """
    return app.decide(report_decision(app, config_name, revision, change, meta))


def request_stop(
    app: RolloutsApp, config_name: str, revision: int, attempt: int, name: str, reason: str, meta: dict[str, Any]
) -> bool:
    """Record that step `name` of that attempt is being stopped (a user deleting its deployer), before the
    signal (7.11): its claim is refused from here. False when the log has nothing to stop (another attempt,
    a step past, a config this log does not hold)."""
    try:
        changed = report(
            app, config_name, revision, lambda d: d.attempt == attempt and d.request_stop(name, reason, meta), meta
        )
    except NotFound:
        return False
    return changed is not None


def report_decision(app: RolloutsApp, config_name: str, revision: int, change: Report, meta: dict[str, Any]) -> Decider:
    def decision() -> tuple[list[Any], Deployment | None]:
        config = app.config(config_name)
        deployment = app.deployment(config, revision)
        if not change(deployment):
            return [], None
        rollout.settle(config, deployment, meta)
        rollback = rollback_for(app, config, deployment, meta)
        if rollback:  # in the save that records the failure: exactly one, through crashes and twins (I10)
            return [*deployment.collect_events(), *rollback], deployment
        return _as_if_alone(config, deployment), deployment

    return decision


def _as_if_alone(config: DeploymentConfig, deployment: Deployment) -> list[Any]:
    """What to save for reports applied at once, their events in the order separate reports
    would have appended them: the deployment's, but for its last, then the config's (the slot's
    release, decided with that last one), then the last. The aggregates follow, with no events
    left, so that the application still caches them."""
    reported = list(deployment.collect_events())
    released = list(config.collect_events())
    return [*reported[:-1], *released, *reported[-1:], config, deployment]


def together(app: RolloutsApp, decisions: Sequence[Decider]) -> list[Any] | None:
    """Run each decision on fresh aggregates, then append all they decided in one save (one commit).

    The decisions must concern different aggregates (one per deployment and config, as a pass
    plans them). None, with nothing appended, when one was refused or the save conflicted:
    each is then to be decided alone, again on fresh state (I4).
    """
    results: list[Any] = []
    aggregates: list[Any] = []
    try:
        app.forget_reads()  # a refusal here is decided again alone, by decide(), which checks its own reads
        for decision in decisions:
            decided, result = decision()
            aggregates += decided
            results.append(result)
        if aggregates:
            app.save(*aggregates)
    except (DomainError, NotFound, IntegrityError):
        return None
    except OperationalError as error:
        if not is_lock_timeout(error):
            raise
        return None
    return results


def peek(app: RolloutsApp, aggregate_id: UUID) -> Deployment:
    """A deployment as the log has it now (new events read), not copied: read it at once, never change it."""
    found: Deployment = peek_at(app, aggregate_id)
    return found


def peek_config(app: RolloutsApp, name: str) -> DeploymentConfig:
    """A config as the log has it now, not copied (as peek)."""
    found: DeploymentConfig = peek_at(app, ids.config_id(name))
    return found


def peek_at(app: RolloutsApp, aggregate_id: UUID) -> Any:  # why: the library's repository returns any aggregate
    try:
        return app.repository.get(aggregate_id, deepcopy_from_cache=False)
    except AggregateNotFoundError:
        raise NotFound(f"no aggregate {aggregate_id}") from None


def current_step(app: RolloutsApp, config_name: str, revision: int, name: str, claimant: str) -> Deployment | None:
    """The deployment, re-read from the log, if `name` is its current, uncreated step and ours."""
    deployment = peek(app, ids.deployment_id(ids.config_id(config_name), revision))
    if not deployment.is_current(name) or deployment.claimant != claimant:
        return None
    if deployment.cancel_requested or deployment.step is None or deployment.step.created or not deployment.step.runs:
        return None  # (a pause is no process: nothing to create)
    return deployment
