"""The application service: each command a user gives loads, decides with the domain, saves once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from ...domain import ids, phases, rollout
from ...domain.config import DeploymentConfig
from ...domain.deployment import Deployment
from ...domain.errors import DomainError, NotFound
from ...domain.freeze import FreezeAll, in_force
from ...domain.meta import Meta
from ..identity import new_meta as new_meta  # where callers have long found it
from ..store.port import APP_NAME
from .deciding import DecidingApp, config_spec, config_spec_of
from .deciding import Decision as Decision
from .deciding import NotUTF8 as NotUTF8
from .deciding import WriteConflict as WriteConflict
from .rollbacks import rollback_for
from .stage_checks import check_config as check_stage

if TYPE_CHECKING:
    from datetime import datetime

    from ...domain.analysis_template import AnalysisTemplate
    from ...domain.spec import Spec


class RolloutsApp(DecidingApp):
    """The rollout log and the commands users give it: configs, rollouts, freezes, approvals, rebinds."""

    name = APP_NAME  # the library names each subclass after itself unless told: the store's tables keep this one

    def create_config(self, name: str, spec: Spec, meta: dict[str, Any]) -> int | None:
        """Register a config; with trigger config-change it rolls out at once."""

        def decision() -> Decision[int | None]:
            if ids.config_id(name) in self.repository:
                raise DomainError(f"config {name!r} already exists")
            check_stage(self, name, spec.to_data())  # 7.10: its upstream exists, and no cycle
            config = DeploymentConfig(name=name, spec=spec.to_data(), meta=meta)
            templates = self._templates(name, None, spec, meta)
            if spec.trigger != "config-change":
                return [config, *templates], None
            aggregates = rollout.trigger(config, [], cause="config change", message=None, supersede=True, meta=meta)
            return [*aggregates, *templates], config.latest_revision

        return self.decide(decision)

    def set_config(self, name: str, change: Callable[[Spec], Spec], meta: dict[str, Any]) -> tuple[bool, int | None]:
        """Change the spec; a rollout-relevant change triggers when the policy says so.

        Returns whether anything changed, and the revision it triggered if any.
        """

        def decision() -> Decision[tuple[bool, int | None]]:
            config = self.config(name)
            old = config_spec(config)
            new = change(old)
            check_stage(self, name, new.to_data())  # 7.10: its upstream exists, and no cycle
            templates = self._templates(name, old, new, meta)
            if not config.change_spec(new.to_data(), meta):
                return [], (False, None)
            if new.trigger != "config-change" or config.paused or new.rollout_part() == old.rollout_part():
                return [config, *templates], (True, None)
            opened = self.open_deployments(config)
            aggregates = rollout.trigger(config, opened, cause="config change", message=None, supersede=True, meta=meta)
            return [*aggregates, *templates], (True, config.latest_revision)

        return self.decide(decision)

    def _templates(self, name: str, old: Spec | None, new: Spec, meta: Meta) -> list[AnalysisTemplate]:
        """The analysis templates config `name`'s new spec names, checked, to save beside it (analysis.named)."""
        from . import analysis  # start-up cost: the templates' aggregate, where specs change only

        return analysis.named(self, name, old, new, meta)

    def latest(self, name: str, message: str | None, supersede: bool, meta: dict[str, Any]) -> int:
        def decision() -> Decision[int]:
            config = self.config(name)
            opened = self.open_deployments(config) if supersede else []
            aggregates = rollout.trigger(
                config, opened, cause="manual", message=message, supersede=supersede, meta=meta
            )
            return aggregates, config.latest_revision

        return self.decide(decision)

    def undo(self, name: str, to_revision: int | None, meta: dict[str, Any]) -> tuple[int | None, int]:
        """Roll out the spec of an earlier revision as a new one; returns (new, source), new None when the
        spec already is the source's (nothing appended: kubectl's `skipped rollback`)."""

        def decision() -> Decision[tuple[int | None, int]]:
            config = self.config(name)
            source = self._undo_source(config, to_revision)
            config.check_can_roll_out(supersedable=False)  # undo has no --supersede to offer
            spec = {**config.spec, **self.spec_source(config, source).typed_spec().rollout_part()}
            restored = config_spec_of(spec).to_data()  # as a spec is stored
            if restored == config.spec:
                return [], (None, source.revision)
            config.change_spec(restored, meta)
            cause = f"rollback to {source.revision}"
            aggregates = rollout.trigger(config, [], cause=cause, message=None, supersede=False, meta=meta)
            return aggregates, (config.latest_revision, source.revision)

        return self.decide(decision)

    def _undo_source(self, config: DeploymentConfig, to_revision: int | None) -> Deployment:
        if to_revision is not None:
            if not 1 <= to_revision <= config.latest_revision:
                raise NotFound(f"config {config.name!r} has no revision {to_revision}")
            return self.deployment(config, to_revision)
        for revision in range(config.latest_revision - 1, 0, -1):
            candidate = self.deployment(config, revision)
            if candidate.phase == phases.COMPLETE:
                return candidate
        raise DomainError(f"config {config.name!r} has no earlier Complete revision to roll back to")

    def cancel(self, name: str, meta: dict[str, Any]) -> list[int]:
        def decision() -> Decision[list[int]]:
            config = self.config(name)
            opened = self.open_deployments(config)
            return rollout.cancel(config, opened, meta), [d.revision for d in opened]

        return self.decide(decision)

    def retry(self, name: str, meta: dict[str, Any]) -> tuple[int, int]:
        def decision() -> Decision[tuple[int, int]]:
            config = self.config(name)
            if config.latest_revision == 0:
                raise NotFound(f"config {name!r} has no rollout yet")
            deployment = self.deployment(config, config.latest_revision)
            aggregates = rollout.retry(config, deployment, meta)
            return aggregates, (deployment.revision, deployment.attempt)

        return self.decide(decision)

    def pause(self, name: str, meta: dict[str, Any]) -> None:
        def decision() -> Decision[None]:
            config = self.config(name)
            config.pause(meta)
            return [config], None

        self.decide(decision)

    def resume(self, name: str, meta: dict[str, Any]) -> None:
        def decision() -> Decision[None]:
            config = self.config(name)
            config.resume(meta)
            return [config], None

        self.decide(decision)

    def freeze(self, names: list[str] | None, until: datetime | None, reason: str, now: datetime, meta: Meta) -> None:
        """Freeze configs `names` together (None: all of them, those created later included)."""

        def decision() -> Decision[None]:
            if names is None:
                every = self.freeze_all_aggregate() or FreezeAll(meta=meta)
                every.freeze_all(until, reason, now, meta)
                return [every], None
            configs = [self.config(name) for name in dict.fromkeys(names)]
            for config in configs:
                config.freeze_config(until, reason, now, meta)
            return list(configs), None

        self.decide(decision)

    def unfreeze(self, names: list[str] | None, now: datetime, meta: Meta) -> None:
        """Lift the freezes of configs `names` (None: the freeze of all)."""

        def decision() -> Decision[None]:
            if names is None:
                every = self.freeze_all_aggregate()
                if every is None:
                    raise DomainError("there is no freeze of --all in force")
                every.unfreeze_all(now, meta)
                return [every], None
            configs = [self.config(name) for name in dict.fromkeys(names)]
            every = self.freeze_all_aggregate()
            for config in configs:
                if not in_force(config.freeze, now) and every is not None and in_force(every.freeze, now):
                    raise DomainError(f"config {config.name} is frozen only by the freeze of all: unfreeze --all")
                config.unfreeze(now, meta)
            return list(configs), None

        self.decide(decision)

    def unfreeze_every(self, names: Iterable[str], now: datetime, meta: Meta) -> None:
        """`unfreeze --all`: lift every freeze in force, the freeze of all and those of configs `names`."""

        wanted = list(dict.fromkeys(names))

        def decision() -> Decision[None]:
            lifted: list[Aggregate] = []
            every = self.freeze_all_aggregate()
            if every is not None and in_force(every.freeze, now):
                every.unfreeze_all(now, meta)
                lifted.append(every)
            with self.preloaded(ids.config_id(name) for name in wanted):
                for config in (self.config(name) for name in wanted):
                    if in_force(config.freeze, now):
                        config.unfreeze(now, meta)
                        lifted.append(config)
            if not lifted:
                raise DomainError("there is no freeze in force")
            return lifted, None

        self.decide(decision)

    def promote(self, name: str, full: bool, meta: Meta) -> tuple[int, str]:
        """End the pause of `name`'s open deployment (7.6); returns its revision and what comes next."""

        def decision() -> Decision[tuple[int, str]]:
            config = self.config(name)
            opened = self.open_deployments(config)
            paused = [d for d in opened if d.paused is not None]
            if not paused:
                raise DomainError(f"config {name} has no paused rollout to promote")
            deployment = paused[-1]
            deployment.promote(full, meta)
            rollout.settle(config, deployment, meta)
            step = deployment.step
            nxt = "complete" if step is None else f"next {step.name}"
            return [config, deployment], (deployment.revision, nxt)

        return self.decide(decision)

    def abort(self, name: str, reason: str | None, meta: Meta) -> int:
        """Fail `name`'s latest open deployment with reason aborted (7.6): a New one at once, with its
        rollback in the same save; an active one once the controller has stopped what runs."""

        def decision() -> Decision[int]:
            config = self.config(name)
            opened = self.open_deployments(config)
            if not opened:
                raise DomainError(f"config {name} has no rollout in progress to abort")
            deployment = opened[-1]
            deployment.request_abort(reason, meta)
            rollout.settle(config, deployment, meta)
            rollback = rollback_for(self, config, deployment, meta)  # holds the config when there is one
            return [deployment, *(rollback or [config])], deployment.revision

        return self.decide(decision)

    def approve(self, name: str, revision: int | None, meta: Meta) -> tuple[int, int]:
        """Approve the deployment (default: the latest) for its current attempt; returns (revision, attempt)."""

        def decision() -> Decision[tuple[int, int]]:
            config = self.config(name)
            if revision is not None and not 1 <= revision <= config.latest_revision:
                raise NotFound(f"config {name!r} has no revision {revision}")
            if config.latest_revision == 0:  # nothing waits for an approval: refused, as when none does (7.4)
                raise DomainError(f"config {name} has nothing waiting for an approval: it has no rollout yet")
            deployment = self.deployment(config, revision or config.latest_revision)
            deployment.approve(meta)
            return [deployment], (deployment.revision, deployment.attempt)

        return self.decide(decision)

    def rebind_home(self, claimant: str, old: tuple[str | None, int | None], head: int, meta: dict[str, Any]) -> None:
        """Record that the home of `claimant` now follows this log as it stands at `head` (an audited event)."""
        from ...domain.home import HomeBinding, home_id  # start-up cost: its event classes, for `home rebind` alone

        def decision() -> Decision[None]:
            try:
                home = self.repository.get(home_id(claimant))
            except AggregateNotFoundError:
                home = HomeBinding(claimant=claimant, meta=meta)
            home.rebind(old[0], old[1], self.recorder.log_id(), head, meta)
            return [home], None

        self.decide(decision)
