"""Loading many aggregates with one read of the log: the library's repository, with a preload window.

A controller pass decides claims and reports for many deployments at once; each load of the
library's repository reads the stream's new events (a round trip on PostgreSQL, two for an
aggregate not in the cache: its snapshot, then its events). `preloaded(ids)` reads the new events
of all of them in one query and, until the window closes, serves their loads from what it read.
Nothing is decided on older state than before: the loads of one decision were never one
snapshot of the log, and every save still checks each aggregate's version (I4).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from copy import deepcopy
from datetime import datetime
from enum import Enum
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Repository, project_aggregate
from eventsourcing.domain import OriginatorIDError, OriginatorVersionError
from eventsourcing.persistence import AggregateRecorder, EventStore, StoredEvent

from ...projections.records import UndecodableEvent
from .opening import ChainedLog
from .port import SnapshotTable

if TYPE_CHECKING:
    from eventsourcing.domain import MutableOrImmutableAggregate

T = TypeVar("T")
Wanted = Sequence[tuple[UUID, int | None]]  # a stream, and the version cached (None: not cached)


class PreloadingRepository(Repository[UUID]):
    """The library's repository; inside `preloaded(ids)`, a load of one of `ids` reads nothing."""

    def __init__(
        self,
        event_store: EventStore[UUID],
        *,
        snapshot_store: EventStore[UUID] | None = None,
        cache_maxsize: int | None = None,
        fastforward: bool = True,
        fastforward_skipping: bool = False,
        deepcopy_from_cache: bool = True,
    ) -> None:
        super().__init__(
            event_store,
            snapshot_store=snapshot_store,
            cache_maxsize=cache_maxsize,
            fastforward=fastforward,
            fastforward_skipping=fastforward_skipping,
            deepcopy_from_cache=deepcopy_from_cache,
        )
        self._local = threading.local()  # a window is one thread's (a notifier's thread loads its own)

    @contextlib.contextmanager
    def preloaded(self, ids: Iterable[UUID]) -> Iterator[None]:
        """Read the new events of aggregates `ids` at once; their loads in this thread, until the
        end of the block, return them as read then (a copy each time, as the library's get does)."""
        outer = getattr(self._local, "window", None)
        self._local.window = self._read(list(dict.fromkeys(ids)))
        try:
            yield
        finally:
            self._local.window = outer

    def holds(self, aggregate_id: UUID) -> bool:
        """Whether a load of `aggregate_id` now reads nothing (it is in this thread's window)."""
        window = getattr(self._local, "window", None)
        return window is not None and aggregate_id in window

    def get(  # why Any: the library's get is generic over the aggregate's class, and its caller names it
        self,
        aggregate_id: UUID,
        *,
        version: int | None = None,
        **kwargs: Any,  # why: the library's options
    ) -> Any:  # why: the aggregate the caller asked for
        window = getattr(self._local, "window", None)
        if window is None or version is not None or aggregate_id not in window:
            return self._library_get(aggregate_id, version, **kwargs)
        found = window[aggregate_id]
        if found is None:
            raise AggregateNotFoundError(aggregate_id)
        if kwargs.get("deepcopy_from_cache", True) and self.deepcopy_from_cache:
            return copy_of(found)
        return found

    def _library_get(
        self,
        aggregate_id: UUID,
        version: int | None,
        **kwargs: Any,  # why: the library's get's options
    ) -> Any:  # why: the aggregate the caller asked for
        """The library's get, its copy of a cached aggregate made by copy_of (deepcopy's equal, at a fraction
        of its cost: deepcopy was a quarter of a `latest --supersede`), its events applied without its
        check of each against a Protocol (as _project)."""
        copy = kwargs.pop("deepcopy_from_cache", True) and self.deepcopy_from_cache
        if kwargs.get("projector_func", project_aggregate) is project_aggregate:
            kwargs["projector_func"] = _project
        found = super().get(aggregate_id, version=version, deepcopy_from_cache=False, **kwargs)
        if copy and self.cache and version is None:  # where the library copies: from its cache
            return copy_of(found)
        return found

    def _reconstruct_aggregate(
        self,
        aggregate_id: UUID,
        version: int | None,
        projector_func: Any,  # why: the library's ProjectorFunction, generic over the aggregate
    ) -> Any:  # why: that aggregate
        """As the library does (its last snapshot, then the events after), in one query, not two,
        where the recorder can (PostgreSQL); an older version, or another log, as the library does."""
        if version is not None or not isinstance(self.event_store.recorder, ChainedLog):
            return super()._reconstruct_aggregate(aggregate_id, version, projector_func)
        events, snapshots = self._events_after([(aggregate_id, None)])
        found = chain(snapshots.get(aggregate_id, []), events.get(aggregate_id, []))
        aggregate = (_project if projector_func is project_aggregate else projector_func)(None, found)
        if aggregate is None:
            raise AggregateNotFoundError(f"Aggregate {aggregate_id!r} version None not found.")
        return aggregate

    def _read(self, ids: Sequence[UUID]) -> dict[UUID, Any]:
        cached = {i: self._cached(i) for i in ids}
        wanted = [(i, None if a is None else a.version) for i, a in cached.items()]
        events, snapshots = self._events_after(wanted)
        window: dict[UUID, Any] = {}
        for i, aggregate in cached.items():
            new = events.get(i, [])
            if aggregate is None:  # as the library reconstructs it: its last snapshot, then the events after
                aggregate = _project(None, chain(snapshots.get(i, []), new))
                if aggregate is not None and self.cache is not None:
                    self.cache.put(i, aggregate)
            elif new:  # fast-forwarded in the cache, as the library's get does it: under its lock
                lock = self._use_fastforward_lock(i)
                try:
                    with lock:  # what another thread's load may have applied meanwhile is not applied again
                        after = aggregate.version
                        aggregate = _project(aggregate, [e for e in new if e.originator_version > after])
                finally:
                    self._disuse_fastforward_lock(i)
            window[i] = aggregate
        return window

    def forget(self, aggregate_id: UUID) -> None:
        """Drop `aggregate_id` from the cache, if there: its next load reads it from the log, as any load
        of an aggregate not cached does (what a load returns is the log's state either way)."""
        if self.cache is not None:
            with contextlib.suppress(KeyError):
                self.cache.get(aggregate_id, evict=True)

    def _cached(self, aggregate_id: UUID) -> MutableOrImmutableAggregate[UUID] | None:
        if self.cache is None:
            return None
        try:
            return self.cache.get(aggregate_id)
        except KeyError:
            return None

    def _events_after(self, wanted: Wanted) -> tuple[dict[UUID, list[Any]], dict[UUID, list[Any]]]:
        """The domain events of each stream after its cached version (after its last snapshot when
        not cached), and those snapshots: in one query where the recorder can, else stream by stream."""
        recorder = self.event_store.recorder
        snapshots = self.snapshot_store.recorder if self.snapshot_store is not None else None
        if isinstance(recorder, ChainedLog):  # ours: in one query (a plain library recorder: stream by stream)
            # (the library's SQLite and PostgreSQL recorders of snapshots name their table and datastore)
            stored, stored_snapshots = recorder.events_after(wanted, cast("SnapshotTable | None", snapshots))
        else:
            stored, stored_snapshots = _one_by_one(recorder, snapshots, wanted)
        to_event = self.event_store.mapper.to_domain_event
        return _by_stream(stored, to_event), _by_stream(stored_snapshots, to_event)


def _project(aggregate: Any, events: Iterable[Any]) -> Any:  # why: any aggregate class, and its events
    """The library's project_aggregate without its check of each event against a Protocol (slow in Python
    3.11, and every event here was made by the library's mapper). An event that does not follow its stream
    (a version out of sequence, a first event that creates nothing, fields its apply lacks) is one the log
    should not hold: the log is damaged, and UndecodableEvent says which event."""
    event = None
    try:
        for event in events:
            aggregate = event.mutate(aggregate)
    except (OriginatorIDError, OriginatorVersionError, AssertionError, TypeError, AttributeError, KeyError) as error:
        what = "an event" if event is None else f"event {event.originator_version} of stream {event.originator_id}"
        raise UndecodableEvent(what, error) from error
    return aggregate


def _one_by_one(
    recorder: AggregateRecorder, snapshots: AggregateRecorder | None, wanted: Wanted
) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """What the library's get reads, for each stream in turn (a local log: no round trip to save)."""
    events: list[StoredEvent] = []
    found: list[StoredEvent] = []
    for stream, version in wanted:
        after = version
        if version is None and snapshots is not None:
            last = snapshots.select_events(stream, desc=True, limit=1)
            found += last
            after = last[0].originator_version if last else None
        events += recorder.select_events(stream, gt=after)
    return events, found


def _by_stream(stored: Iterable[StoredEvent], to_event: Callable[[StoredEvent], Any]) -> dict[UUID, list[Any]]:
    """Domain events by stream, each stream's in version order."""
    found: dict[UUID, list[Any]] = {}
    try:
        ordered = sorted(stored, key=lambda s: (str(s.originator_id), s.originator_version))
    except TypeError as error:  # a version edited to text or a blob: not comparable with the others
        raise UndecodableEvent("an event whose version is not a number", error) from error
    for s in ordered:
        event = to_event(s)
        found.setdefault(event.originator_id, []).append(event)
    return found


# Values that never change in place: a copy shares them, as deepcopy does for most of them anyway.
_ATOMIC = frozenset({str, int, float, bool, type(None), bytes, UUID, datetime})


def copy_of(aggregate: T) -> T:
    """A deep copy of an aggregate, as copy.deepcopy makes it (shared containers stay shared), at a
    fraction of its cost: an aggregate's state is made of dicts, lists, tuples, atoms and frozen
    values, which are copied or shared here without deepcopy's dispatch; anything else is deepcopy's."""
    kind = type(aggregate)
    if not (_copies_plainly(kind) and hasattr(aggregate, "__dict__")):
        return deepcopy(aggregate)
    memo: dict[int, Any] = {}
    twin = kind.__new__(kind)
    twin.__dict__.update({name: _copied(value, memo) for name, value in vars(aggregate).items()})
    return twin


def _copies_plainly(kind: type) -> bool:
    """Whether deepcopy copies instances of `kind` as their __dict__ (no copy or pickling hook of its own)."""
    hooks = ("__reduce_ex__", "__reduce__", "__getstate__")
    return all(getattr(kind, h) is getattr(object, h) for h in hooks) and not (
        hasattr(kind, "__deepcopy__") or hasattr(kind, "__setstate__")
    )


def _copied(value: Any, memo: dict[int, Any]) -> Any:  # why: any value of an aggregate's state, copied
    kind = type(value)
    if kind in _ATOMIC or isinstance(value, Enum):
        return value
    if id(value) in memo:
        return memo[id(value)]
    if kind is dict:
        mapping: dict[Any, Any] = {}
        memo[id(value)] = mapping
        mapping.update({k: _copied(v, memo) for k, v in value.items()})  # keys are hashable: atoms here
        return mapping
    if kind is list:
        items: list[Any] = []
        memo[id(value)] = items
        items.extend(_copied(v, memo) for v in value)
        return items
    if kind is tuple:
        memo[id(value)] = found = tuple(_copied(v, memo) for v in value)
        return found
    if _frozen_atoms(value):
        return value
    return deepcopy(value, memo)  # memo: deepcopy's own protocol (id -> copy), shared with it


def _frozen_atoms(value: Any) -> bool:  # why: any value; a dataclass's fields are read off it
    """A frozen dataclass whose fields all hold atoms (a Step, a Who): nothing in it can change."""
    params = getattr(type(value), "__dataclass_params__", None)
    if params is None or not params.frozen:
        return False
    return all(type(getattr(value, f.name)) in _ATOMIC for f in dataclasses.fields(value))
