"""Carrying out a plan: runtime calls and appends, each checked against the log first."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import Any

from adapters.controller import commands
from adapters.controller.plan import Action, is_gone
from adapters.runtime.local import DeployerExists, LocalRuntime
from domain.deployment import Deployment


class Executor:
    """Runs actions for one controller (`claimant`) against the app and the local runtime."""

    def __init__(self, app: Any, runtime: LocalRuntime, claimant: str, actor: str, cwd: str) -> None:
        self.app = app
        self.runtime = runtime
        self.claimant = claimant
        self.actor = actor
        self.cwd = cwd
        self.ended: set[str] = set()

    def meta(self, notification_id: int | None = None) -> dict[str, Any]:
        from adapters.application import new_meta

        return new_meta(self.actor, notification_id=notification_id, claimant=self.claimant)

    def run(self, action: Action, notification_id: int | None = None) -> None:
        getattr(self, f"_{action.kind}")(action, self.meta(notification_id))

    # -- actions -------------------------------------------------------------

    def _claim(self, a: Action, meta: dict[str, Any]) -> None:
        """Claim, then create at once: the claim is committed, and the create re-checks the log."""
        step = commands.claim(self.app, a.config, a.version, self.claimant, meta)
        if step is not None:
            self._create(dataclasses.replace(a, kind="create", name=step), meta)

    def _create(self, a: Action, meta: dict[str, Any]) -> None:
        """Create only for a committed claim, re-read from the log; the runtime refuses a used name."""
        deployment = commands.current_step(self.app, a.config, a.version, a.name, self.claimant)  # type: ignore[arg-type]
        if deployment is None:
            return
        argv, env = launch_spec(deployment, os.environ)
        # DeployerExists: created before (by us before a crash, or by a twin controller): only record it.
        with contextlib.suppress(DeployerExists):
            self.runtime.create(
                a.name,  # type: ignore[arg-type]
                config=a.config,
                revision=a.version,
                attempt=deployment.attempt,
                argv=argv,
                env=env,
                cwd=self.cwd,
            )
        self._record_created(a, meta)

    def _record_created(self, a: Action, meta: dict[str, Any]) -> None:
        self._report(a, lambda d: d.report_created(a.name, f"local:{a.name}", meta), meta)  # type: ignore[arg-type]

    def _record_started(self, a: Action, meta: dict[str, Any]) -> None:
        self._report(a, lambda d: d.report_started(a.name, meta), meta)  # type: ignore[arg-type]

    def _record_exit(self, a: Action, meta: dict[str, Any]) -> None:
        self._report(a, lambda d: d.report_exited(a.name, a.exit_code, a.reason, meta), meta)  # type: ignore[arg-type]

    def _record_lost(self, a: Action, meta: dict[str, Any]) -> None:
        self._report(a, lambda d: d.report_lost(a.name, a.reason or "gone", meta), meta)  # type: ignore[arg-type]

    def _stop(self, a: Action, meta: dict[str, Any]) -> None:
        self._end_attempt(a, lambda d: d.is_open and d.cancel_requested, lambda d: d.confirm_cancelled(meta), meta)

    _cancel = _stop

    def _timeout(self, a: Action, meta: dict[str, Any]) -> None:
        self._end_attempt(
            a, lambda d: d.is_open and d.phase != "New", lambda d: d.time_out(d.typed_spec().timeout, meta), meta
        )

    def _end_attempt(
        self, a: Action, due: Callable[[Deployment], bool], end: Callable[[Deployment], None], meta: dict[str, Any]
    ) -> None:
        """Stop what runs NOW according to the log (not the plan's view), then end the attempt
        only if that is still the current step: a stale plan must not leave a later step running."""
        deployment = self.app.deployment(self.app.config(a.config), a.version)
        if not (due(deployment) and deployment.attempt == a.attempt):
            return
        name = deployment.step["name"] if deployment.step else None
        self._halt(dataclasses.replace(a, name=name))
        row = self.runtime.get(name) if name else None
        if row is not None and not is_gone(row):
            return  # still dying (another controller's stop in its grace): end the attempt on a later pass

        def change(d: Deployment) -> bool:
            if not (due(d) and d.attempt == a.attempt and (d.step["name"] if d.step else None) == name):
                return False
            end(d)
            return True

        self._report(a, change, meta)

    # -- helpers -------------------------------------------------------------

    def _halt(self, a: Action) -> None:
        """Stop the deployer; with no row yet, a tombstone stops a create in flight elsewhere."""
        if a.name is None:
            return
        if not self.runtime.tombstone(
            a.name, config=a.config, revision=a.version, attempt=a.attempt, reason=a.reason or "stopped"
        ):
            self.runtime.stop(a.name, reason=a.reason or "stopped")

    def _report(self, a: Action, change: commands.Report, meta: dict[str, Any]) -> None:
        changed = commands.report(self.app, a.config, a.version, change, meta)
        if changed is not None and changed.is_terminal:
            self.ended.add(a.config)  # the pass that ends a deployment prunes (history limit)


def launch_spec(deployment: Deployment, base_env: Any) -> tuple[list[str], dict[str, str]]:
    """The argv and full environment of the deployment's current step (DESIGN section 7)."""
    spec = deployment.typed_spec()
    step = deployment.step or {}
    kind, name = step["kind"], step["name"]
    env = {
        **base_env,
        **spec.env,
        "ROLLOUT_CONFIG": deployment.config,
        "ROLLOUT_VERSION": str(deployment.revision),
        "ROLLOUT_ATTEMPT": str(deployment.attempt),
        "ROLLOUT_DEPLOYER": name,
    }
    if kind == "deployer":
        return list(spec.command), env
    hook = spec.hook(kind)
    return list(hook.command), {**env, "ROLLOUT_HOOK": kind}  # type: ignore[union-attr]
