"""The application service: each command loads, decides with the domain, saves once."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, Repository
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    InfrastructureFactory,
    IntegrityError,
    Mapper,
    MapperDeserialisationError,
    OperationalError,
    StoredEvent,
)
from eventsourcing.utils import Environment, strtobool

from ..adapters.identity import new_meta as new_meta  # where callers have long found it
from ..adapters.store.failures import is_lock_timeout
from ..adapters.store.port import APP_NAME
from ..adapters.store.preload import PreloadingRepository
from ..domain import ids, phases, rollout
from ..domain.config import DeploymentConfig
from ..domain.deployment import Deployment
from ..domain.errors import Conflict, DomainError, NotFound, UsageError
from ..domain.freeze import ALL_ID, FreezeAll, in_force
from ..domain.home import Home, home_id
from ..projections.records import UndecodableEvent
from .commands import rollback_for

if TYPE_CHECKING:
    from datetime import datetime

    from ..adapters.store.backends import ChainedRecorder
    from ..domain.freeze import FreezeAll
    from ..domain.spec import Spec

T = TypeVar("T")
A = TypeVar("A", bound=Aggregate)
Decision = tuple[list[Aggregate], T]
TRIES = 12
Meta = dict[str, Any]


class WriteConflict(Conflict):
    """A write still conflicted after its retries (the CLI exits 3)."""


class NotUTF8(UsageError):
    """A value given on the command line is not text the log can hold (the CLI exits 2)."""


def config_spec(config: DeploymentConfig) -> Spec:
    return config_spec_of(config.spec)


def config_spec_of(data: dict[str, Any]) -> Spec:
    from ..domain.spec import Spec  # start-up cost: pydantic loads only for commands that change a spec

    return Spec.model_validate(data)


def backoff(attempt: int, base: float = 0.01, cap: float = 0.5) -> None:
    """Sleep a jittered, growing delay before deciding again."""
    time.sleep(min(cap, base * 2**attempt) * (0.5 + random.random()))


class RolloutsApp(Application[UUID]):
    """The rollout log: configs and deployments, with optimistic concurrency on each."""

    name = APP_NAME
    # No snapshots, written or read: a snapshot is a copy of a config's state outside the hash chain,
    # from which the library would load the config a command decides on (an edited one made the next
    # deployment run its command while `log verify` said ok). A config is its chained events' fold:
    # a cold load of one with 1,200 events replays them in ~25 ms. Logs written before keep their
    # snapshots, unread here; `audit` still checks each is its events' fold (an earlier version loads it).
    recorder: ChainedRecorder  # as service.bootstrap opens it

    def __init__(self, env: Any = None) -> None:
        super().__init__(env)
        self._reads: list[tuple[Any, int]] = []
        self._guards: list[tuple[UUID, int]] = []  # read, not written, by the decision being made
        self._head: int | None = None  # the log's head the decision being made read (guard_head)

    def construct_env(self, name: str, env: Any = None) -> Environment:
        """The library's settings, with snapshots off whatever the environment says (see the class)."""
        settings = super().construct_env(name, env)
        for key in settings.create_keys(InfrastructureFactory.IS_SNAPSHOTTING_ENABLED):
            settings[key] = "n"
        return settings

    def guard(self, aggregate_id: UUID, version: int) -> None:
        """The next save appends nothing unless stream `aggregate_id` is still at `version` (0: absent)
        when it commits: a decision that depends on a stream it does not write (optimistic concurrency
        on a read)."""
        self._guards.append((aggregate_id, version))

    def guard_head(self, head: int) -> None:
        """The next save appends nothing unless the log still ends at `head` when it commits: a decision
        that read the whole log (a seal)."""
        self._head = head

    def save(self, *objs: Any, **kwargs: Any) -> Any:
        guards, self._guards = self._guards, []
        head, self._head = self._head, None
        if head is not None:
            kwargs = {**kwargs, "head": head}
        return super().save(*objs, **({**kwargs, "guards": guards} if guards else kwargs))

    def construct_repository(self) -> Repository[UUID]:
        """The library's repository, able to load many aggregates with one read (adapters.preload)."""

        maxsize = self.env.get(self.AGGREGATE_CACHE_MAXSIZE)
        return PreloadingRepository(  # with the library's settings, read as it reads them
            event_store=self.events,
            snapshot_store=self.snapshots,
            cache_maxsize=int(maxsize) if maxsize else None,
            fastforward=strtobool(self.env.get(self.AGGREGATE_CACHE_FASTFORWARD, "y")),
            fastforward_skipping=strtobool(self.env.get(self.AGGREGATE_CACHE_FASTFORWARD_SKIPPING, "n")),
            deepcopy_from_cache=strtobool(self.env.get(self.DEEPCOPY_FROM_AGGREGATE_CACHE, "y")),
        )

    def preloaded(self, ids: Iterable[UUID]) -> contextlib.AbstractContextManager[None]:
        """Loads of aggregates `ids` in the block read nothing: their new events are read at once, now."""
        return self.repository.preloaded(ids)  # type: ignore[attr-defined, no-any-return]

    def construct_mapper(self) -> Mapper[UUID]:
        """The library's mapper, saying which event of the log it could not decode (the log is damaged),
        and refusing text that cannot be stored (a command-line argument that is not UTF-8)."""
        mapper = super().construct_mapper()
        to_domain_event, to_stored_event = mapper.to_domain_event, mapper.to_stored_event

        def encoded(event: Any) -> StoredEvent:
            try:
                return to_stored_event(event)
            except UnicodeEncodeError as error:
                raise NotUTF8(f"only UTF-8 text can be recorded: {error}") from None

        def decoded(stored: StoredEvent) -> Any:
            try:
                return to_domain_event(stored)
            except MapperDeserialisationError as error:
                what = f"event {stored.originator_version} of stream {stored.originator_id}"
                raise UndecodableEvent(what, error.__cause__ or error) from error

        mapper.to_domain_event = decoded  # type: ignore[method-assign]
        mapper.to_stored_event = encoded  # type: ignore[method-assign]
        return mapper

    # -- loading -------------------------------------------------------------

    def config(self, name: str) -> DeploymentConfig:
        try:
            return self._loaded(self.repository.get(ids.config_id(name)))
        except AggregateNotFoundError:
            raise NotFound(f"config {name!r} not found") from None

    def deployment(self, config: DeploymentConfig, revision: int) -> Deployment:
        try:
            return self._loaded(self.repository.get(ids.deployment_id(config.id, revision)))
        except AggregateNotFoundError:
            raise NotFound(f"config {config.name!r} has no revision {revision}") from None

    def _loaded(self, aggregate: A) -> A:
        self._reads.append((aggregate.id, aggregate.version))  # the version read, before the decision
        return aggregate

    def forget_reads(self) -> None:
        """Drop the reads recorded by loads outside decide() (they are checked by nobody)."""
        self._reads = []
        self._guards = []
        self._head = None

    def _read_was_torn(self) -> bool:
        """Whether an aggregate of this decision changed after it was read (the reads are not one snapshot)."""
        return any(self.recorder.select_events(id_, gt=version, limit=1) for id_, version in self._reads)

    def open_deployments(self, config: DeploymentConfig) -> list[Deployment]:
        return [self.deployment(config, r) for r in config.open_revisions]

    def decide(self, decision: Callable[[], Decision[T]]) -> T:
        """Run `decision` on fresh state and save it; decide again on a conflict (I4)."""
        for attempt in range(TRIES):
            self._reads = []
            self._guards = []
            self._head = None
            try:
                aggregates, result = decision()
            except DomainError:
                # Refused on reads taken at different moments? Decide again on fresh ones.
                if not self._read_was_torn():
                    raise
                backoff(attempt)
                continue
            try:
                self.save(*aggregates)
                return result
            except IntegrityError:
                backoff(attempt)
            except OperationalError as error:
                if not is_lock_timeout(error):
                    raise
                backoff(attempt)
        raise WriteConflict(f"the write still conflicted after {TRIES} tries; try again")

    # -- commands ------------------------------------------------------------

    def create_config(self, name: str, spec: Spec, meta: dict[str, Any]) -> int | None:
        """Register a config; with trigger config-change it rolls out at once."""

        def decision() -> Decision[int | None]:
            if ids.config_id(name) in self.repository:
                raise DomainError(f"config {name!r} already exists")
            config = DeploymentConfig(name=name, spec=spec.to_data(), meta=meta)
            if spec.trigger != "config-change":
                return [config], None
            aggregates = rollout.trigger(config, [], cause="config change", message=None, supersede=True, meta=meta)
            return aggregates, config.latest_revision

        return self.decide(decision)

    def set_config(self, name: str, change: Callable[[Spec], Spec], meta: dict[str, Any]) -> tuple[bool, int | None]:
        """Change the spec; a rollout-relevant change triggers when the policy says so.

        Returns whether anything changed, and the revision it triggered if any.
        """

        def decision() -> Decision[tuple[bool, int | None]]:
            config = self.config(name)
            old = config_spec(config)
            new = change(old)
            if not config.change_spec(new.to_data(), meta):
                return [], (False, None)
            if new.trigger != "config-change" or config.paused or new.rollout_part() == old.rollout_part():
                return [config], (True, None)
            opened = self.open_deployments(config)
            aggregates = rollout.trigger(config, opened, cause="config change", message=None, supersede=True, meta=meta)
            return aggregates, (True, config.latest_revision)

        return self.decide(decision)

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

    def spec_source(self, config: DeploymentConfig, source: Deployment) -> Deployment:
        """The deployment whose rollout part a rollback to `source` restores: `source`, unless it is an
        automatic rollback, which ran the spec of the revision it restored as one step (its own spec has
        no steps and no pause): then that revision's, steps included (DESIGN 7.6)."""
        while (earlier := rollout.restored_revision(source)) is not None and earlier < source.revision:
            source = self.deployment(config, earlier)
        return source

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

    def freeze_all_aggregate(self) -> FreezeAll | None:
        """The freeze of `freeze --all` as the log has it now (None: never frozen)."""

        try:
            return self._loaded(self.repository.get(ALL_ID))
        except AggregateNotFoundError:
            return None

    def guarded_freeze_all(self) -> FreezeAll | None:
        """The freeze of all, for a claim: whose save fails (and is decided again) if it moved meanwhile."""

        if self.repository.holds(ALL_ID):  # type: ignore[attr-defined] - read with the others (preloaded)
            every = self.freeze_all_aggregate()
        else:
            last = self.recorder.select_events(ALL_ID, desc=True, limit=1)  # one query: most logs never froze all
            every = self.freeze_all_aggregate() if last else None
        self.guard(ALL_ID, every.version if every else 0)
        return every

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

        def decision() -> Decision[None]:
            try:
                home = self.repository.get(home_id(claimant))
            except AggregateNotFoundError:
                home = Home(claimant=claimant, meta=meta)
            home.rebind(old[0], old[1], self.recorder.log_id(), head, meta)
            return [home], None

        self.decide(decision)
