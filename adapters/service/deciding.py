"""The log as an application: loading configs and deployments, and deciding on them with optimistic
concurrency (each decision made again on fresh state when it lost a race, I4)."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, Repository
from eventsourcing.domain import Aggregate, DomainEventProtocol, MutableOrImmutableAggregate
from eventsourcing.persistence import (
    InfrastructureFactory,
    IntegrityError,
    Mapper,
    MapperDeserialisationError,
    OperationalError,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import Environment, TopicError, strtobool

from ...domain import ids, rollout
from ...domain.config import DeploymentConfig
from ...domain.deployment import Deployment
from ...domain.errors import Conflict, DomainError, NotFound, UsageError
from ...domain.freeze import ALL_ID, FreezeAll
from ...projections.records import UndecodableEvent
from ..store.failures import is_lock_timeout
from ..store.port import APP_NAME
from ..store.preload import PreloadingRepository

if TYPE_CHECKING:
    from ...domain.spec import Spec
    from ..store.backends import ChainedRecorder

T = TypeVar("T")
A = TypeVar("A", bound=Aggregate)
Decision = tuple[list[Aggregate], T]
TRIES = 12


class WriteConflict(Conflict):
    """A write still conflicted after its retries (the CLI exits 3)."""


class NotUTF8(UsageError):
    """A value given on the command line is not text the log can hold (the CLI exits 2)."""


def config_spec(config: DeploymentConfig) -> Spec:
    return config_spec_of(config.spec)


def config_spec_of(data: dict[str, Any]) -> Spec:
    from ...domain.spec import Spec  # start-up cost: pydantic loads only for commands that change a spec

    return Spec.model_validate(data)


def backoff(attempt: int, base: float = 0.01, cap: float = 0.5) -> None:
    """Sleep a jittered, growing delay before deciding again."""
    time.sleep(min(cap, base * 2**attempt) * (0.5 + random.random()))


class DecidingApp(Application[UUID]):
    """The rollout log: configs and deployments loaded, and decisions on them saved with optimistic
    concurrency on each (the commands are RolloutsApp's)."""

    name = APP_NAME
    # No snapshots, written or read: a snapshot is a copy of a config's state outside the hash chain,
    # from which the library would load the config a command decides on (an edited one made the next
    # deployment run its command while `log verify` said ok). A config is its chained events' fold:
    # a cold load of one with 1,200 events replays them in ~25 ms. Logs written before keep their
    # snapshots, unread here; `audit` still checks each is its events' fold (an earlier version loads it).
    recorder: ChainedRecorder  # as service.bootstrap opens it
    repository: PreloadingRepository  # as construct_repository makes it

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        super().__init__(env)
        self._reads: list[tuple[UUID, int]] = []
        self._guards: list[tuple[UUID, int]] = []  # read, not written, by the decision being made
        self._head: int | None = None  # the log's head the decision being made read (guard_head)

    def construct_env(self, name: str, env: Mapping[str, str] | None = None) -> Environment:
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

    def save(
        self,
        *objs: MutableOrImmutableAggregate[UUID] | DomainEventProtocol[UUID] | None,
        **kwargs: Any,  # why: the library's own save keywords, passed on as given
    ) -> list[Recording[UUID]]:
        guards, self._guards = self._guards, []
        written = {o.id for o in objs if isinstance(o, Aggregate)}  # their own versions are checked as they save
        guards = [(stream, version) for stream, version in guards if stream not in written]
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
        return self.repository.preloaded(ids)

    def construct_mapper(self) -> Mapper[UUID]:
        """The library's mapper, saying which event of the log it could not decode (the log is damaged),
        and refusing text that cannot be stored (a command-line argument that is not UTF-8)."""
        mapper = super().construct_mapper()
        to_domain_event, to_stored_event = mapper.to_domain_event, mapper.to_stored_event

        def encoded(event: DomainEventProtocol[UUID]) -> StoredEvent:
            try:
                return to_stored_event(event)
            except UnicodeEncodeError as error:
                raise NotUTF8(f"only UTF-8 text can be recorded: {error}") from None

        def decoded(stored: StoredEvent) -> DomainEventProtocol[UUID]:
            try:
                return to_domain_event(stored)
            # Besides data that is not an event document: a topic that names no event class (a NULL, no such
            # module or class, a class that is not an event), or fields the event cannot be made of.
            except (MapperDeserialisationError, TopicError, TypeError, ValueError, AttributeError) as error:
                what = f"event {stored.originator_version} of stream {stored.originator_id}"
                cause = error.__cause__ if isinstance(error.__cause__, Exception) else error
                raise UndecodableEvent(what, cause) from error

        mapper.to_domain_event = decoded  # type: ignore[method-assign, assignment]  # per instance, as a wrapper
        mapper.to_stored_event = encoded  # type: ignore[method-assign, assignment]  # per instance, as a wrapper
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

    def spec_source(self, config: DeploymentConfig, source: Deployment) -> Deployment:
        """The deployment whose rollout part a rollback to `source` restores: `source`, unless it is an
        automatic rollback, which ran the spec of the revision it restored as one step (its own spec has
        no steps and no pause): then that revision's, steps included (DESIGN 7.6)."""
        while (earlier := rollout.restored_revision(source)) is not None and earlier < source.revision:
            source = self.deployment(config, earlier)
        return source

    def freeze_all_aggregate(self) -> FreezeAll | None:
        """The freeze of `freeze --all` as the log has it now (None: never frozen)."""

        try:
            return self._loaded(self.repository.get(ALL_ID))
        except AggregateNotFoundError:
            return None

    def guarded_freeze_all(self) -> FreezeAll | None:
        """The freeze of all, for a claim: whose save fails (and is decided again) if it moved meanwhile."""

        if self.repository.holds(ALL_ID):  # read with the others (preloaded)
            every = self.freeze_all_aggregate()
        else:
            last = self.recorder.select_events(ALL_ID, desc=True, limit=1)  # one query: most logs never froze all
            every = self.freeze_all_aggregate() if last else None
        self.guard(ALL_ID, every.version if every else 0)
        return every
