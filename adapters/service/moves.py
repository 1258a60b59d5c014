"""Moving a log (DESIGN 7.3, "a move is not a copy"): the source's seal, and the new log's first events.

A seal is decided on the whole log (no deployment New, Pending or Running: a move carries no open work,
DESIGN 7.11) and saved only if the log still
ends where that decision read it; from then on the recorders refuse every append to the sealed log
(log_recorder.LogSealed), in the very transaction that would append. An import makes a new log: the
store keeps its own id, and the import's transaction ends with the log's origin (the source's id
and head) and, for a fork, every deployment left open failed, so nothing of the old history can be
claimed there again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate, CanMutateProtocol
from eventsourcing.persistence import StoredEvent

from ...domain import rollout
from ...domain.errors import DomainError
from ...domain.ids import origin_id
from ...domain.log import LogOrigin, LogSeal
from ...domain.log_writers import writer_of
from ...domain.meta import Meta
from ...domain.open_fold import OpenFold
from ...projections.records import record
from ..store.log_recorder import LogSealed

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..store.port import LogRecorder, StreamEvents
    from ..store.transfer import Checked
    from .application import RolloutsApp


@dataclass(frozen=True)
class Seal:
    position: int  # the seal's own
    head: int  # the last position before it
    head_hash: str | None


def seal(app: RolloutsApp, reason: str | None, meta: Meta) -> Seal:
    """Append the log's seal, refused (DomainError) while a deployment is New, Pending or Running, or when
    the log is sealed already, or has no id."""
    recorder = app.recorder
    log_id = recorder.log_id()
    if log_id is None:
        raise DomainError("this log has no id (it was made before logs had one): it cannot be sealed")

    def decision() -> tuple[list[Any], Seal]:
        if (sealed := recorder.sealed()) is not None:
            raise LogSealed(log_id, sealed)
        head = recorder.max_notification_id() or 0
        left = _left_open(recorder, head)
        if left:
            shown = ", ".join(f"{config} version {revision}" for config, revision in left[:5])
            more = f" and {len(left) - 5} more" if len(left) > 5 else ""
            raise DomainError(
                f"cannot seal the log while a deployment is New, Pending or Running ({shown}{more}): a move"
                " carries no open work; wait until it ends (rollout status --watch), or cancel it"
            )
        head_hash = recorder.hash_at(head) if head else None
        app.guard_head(head)
        return [LogSeal(log_id=log_id, head=head, head_hash=head_hash, reason=reason, meta=meta)], Seal(
            head + 1, head, head_hash
        )

    found = app.decide(decision)
    position = recorder.sealed()  # (a sequence may skip a position: ask)
    return Seal(position or found.position, found.head, found.head_hash)


def _left_open(recorder: LogRecorder, head: int) -> list[tuple[str, int]]:
    """(config, revision) of the deployments New, Pending or Running at `head`: the log folded from zero."""
    fold = OpenFold()
    for position, stream, version, topic, state, _ in recorder.hashed_events(1, head):
        if topic.startswith("domain.deployment:"):
            found = record(position, str(stream), version, topic, state)
            fold.feed(found.stream, found.kind, found.type, found.data)
    return fold.left_open()


def check_unsealed(recorder: LogRecorder) -> None:
    """LogSealed when the log is sealed (a controller stops: its log moved)."""
    if (position := recorder.sealed()) is not None:
        raise LogSealed(recorder.log_id() or "", position)


def ending(app: RolloutsApp, meta: Meta) -> Callable[[Checked, StreamEvents], list[StoredEvent]]:
    """What an import appends after the imported events, in its transaction: the new log's origin, and
    for a fork each deployment left open failed (with the config's slot released), as stored events."""
    log_id = app.recorder.log_id()
    if log_id is None:
        raise DomainError("the target store has no log id: it cannot take an import")

    def make(found: Checked, read: StreamEvents) -> list[StoredEvent]:
        fork = found.fold is not None
        origin = LogOrigin(
            log_id=log_id,
            source_log_id=found.log_id,
            head=found.head,
            head_hash=found.head_hash,
            fork=fork,
            meta=meta,
        )
        changed: list[Any] = [origin]
        if found.fold is not None:
            reason = (
                f"forked: log {found.log_id} at position {found.head}, copied unsealed (its deployers may run there)"
            )
            changed += _abandoned(app, found.fold, read, reason, meta)
        return [app.mapper.to_stored_event(e) for a in changed for e in a.collect_events()]

    return make


def _abandoned(app: RolloutsApp, fold: OpenFold, read: StreamEvents, reason: str, meta: Meta) -> list[Any]:
    """The configs and deployments of `fold`'s open deployments, each failed with `reason`."""
    streams = [UUID(s) for s in fold.open()]
    if not streams:
        return []
    configs = {UUID(fold.configs[str(s)]) for s in streams}
    loaded = _aggregates(app, read([*configs, *streams]))
    for stream in streams:
        deployment = loaded[stream]
        deployment.abandon(reason, meta)
        rollout.settle(loaded[UUID(fold.configs[str(stream)])], deployment, meta)
    return [loaded[c] for c in configs] + [loaded[s] for s in streams]


def _aggregates(app: RolloutsApp, events: list[StoredEvent]) -> dict[UUID, Any]:
    """The aggregates that `events` (whole streams, in order) fold into."""
    found: dict[UUID, Any] = {}
    for stored in events:
        event = cast("CanMutateProtocol[Aggregate]", app.mapper.to_domain_event(stored))  # events of our aggregates
        key = stored.originator_id if isinstance(stored.originator_id, UUID) else UUID(stored.originator_id)
        found[key] = event.mutate(found.get(key))
    return found


def origin_of(recorder: LogRecorder) -> dict[str, Any] | None:
    """Where this log came from (`log verify -o json`): None for a log made here."""
    import orjson

    log_id = recorder.log_id()
    found = recorder.select_events(origin_id(log_id), limit=1) if log_id else []
    if not found:
        return None
    data = orjson.loads(found[0].state)
    return {"log_id": data["source_log_id"], "head": data["head"], "head_hash": data["head_hash"], "fork": data["fork"]}


def log_ids_by_position(app: RolloutsApp) -> Callable[[int], str]:
    """The id of the log that first wrote each position. An imported log, or one renamed when a home was
    rebound onto an older copy, holds positions its origin wrote first: their notifications keep the
    keys they had there and their claims the runtime rows made for them, while the positions after the
    origin's head take this log's own id, so one key never names two changes."""

    def origin(log_id: str) -> tuple[str | None, int] | None:
        try:
            found = app.repository.get(origin_id(log_id))
        except AggregateNotFoundError:
            return None
        return found.source_log_id, found.head

    return writer_of(app.recorder.log_id() or "", origin)


def rename_rewound(app: RolloutsApp, meta: Meta) -> str:
    """Give a log that went back (an older copy put back, then a home rebound onto it) an id of its own,
    after an origin naming the old id and the head it went back to: its next positions are new
    changes, and their notification keys must not be the old log's. The new id."""
    old = app.recorder.log_id()
    head = app.recorder.max_notification_id() or 0
    new = uuid4().hex
    origin = LogOrigin(
        log_id=new,
        source_log_id=old,
        head=head,
        head_hash=app.recorder.hash_at(head) if head else None,
        fork=True,
        meta=meta,
    )
    app.save(origin)  # first: a crash before the rename leaves an origin of an id no log has, which is harmless
    app.recorder.take_log_id(new)
    return new
