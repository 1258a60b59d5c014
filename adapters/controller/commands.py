"""The controller's writes: each re-decided on fresh aggregates from the log (I4)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain import rollout
from domain.deployment import Deployment
from domain.errors import DomainError

Report = Callable[[Deployment], bool]


def claim(app: Any, config_name: str, revision: int, claimant: str, meta: dict[str, Any]) -> str | None:
    """Claim the slot for `revision` and return the first deployer's name; None when not due."""

    def decision() -> tuple[list[Any], str | None]:
        config = app.config(config_name)
        deployment = app.deployment(config, revision)
        try:
            aggregates = rollout.claim(config, deployment, claimant, meta)
        except DomainError:
            return [], None
        return aggregates, deployment.step["name"]  # type: ignore[index]

    return app.decide(decision)


def report(app: Any, config_name: str, revision: int, change: Report, meta: dict[str, Any]) -> Deployment | None:
    """Apply `change` to the deployment; a terminal outcome releases the slot in the same save.

    Returns the changed deployment, or None when `change` found nothing to record.
    """

    def decision() -> tuple[list[Any], Deployment | None]:
        config = app.config(config_name)
        deployment = app.deployment(config, revision)
        if not change(deployment):
            return [], None
        rollout.settle(config, deployment, meta)
        return [config, deployment], deployment

    return app.decide(decision)


def current_step(app: Any, config_name: str, revision: int, name: str, claimant: str) -> Deployment | None:
    """The deployment, re-read from the log, if `name` is its current, uncreated step and ours."""
    deployment = app.deployment(app.config(config_name), revision)
    if not deployment.is_current(name) or deployment.claimant != claimant:
        return None
    if deployment.cancel_requested or deployment.step["created"]:  # type: ignore[index]
        return None
    return deployment
