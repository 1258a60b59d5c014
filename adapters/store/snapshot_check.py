"""The aggregates' snapshots checked against the log (I8).

Versions before 2026-12-06 stored a snapshot of a config every so many events, outside the hash chain,
and loaded the aggregate from its last snapshot and the events after it: a command decided from it (the
spec a new deployment freezes, say). This version takes and reads none, but such a version may still be
run on the log: a snapshot that is not what its stream's events fold to (edited, or inserted) is
reported, as a chain break is.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Snapshot
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Mapper,
    Transcoder,
    UUIDAsHex,
)
from eventsourcing.utils import get_topic

from ...domain import config, deployment, freeze, home
from . import chain

if TYPE_CHECKING:
    from .port import LogRecorder

AGGREGATES = (config, deployment, freeze, home)  # imported: their events' topics are registered as they load


def snapshot_breaks(recorder: LogRecorder) -> list[chain.Break]:
    """Each stored snapshot that is not its stream's events folded to its version, as a break at the
    position of that version's event (0 when the stream has none)."""
    transcoder = _transcoder()
    mapper: Mapper[UUID] = Mapper(transcoder=transcoder)
    found = []
    for stream, rows in groupby(recorder.snapshot_rows(), key=lambda row: str(row[0])):
        snapshots = list(rows)
        folded = _folded(recorder, mapper, UUID(stream), {row[1] for row in snapshots})
        for _, version, topic, state, position in snapshots:
            taken = folded.get(version)
            if taken is None or not _same(transcoder, topic, bytes(state), taken):
                found.append(
                    chain.Break(
                        position or 0,
                        f"snapshot of stream {stream} at version {version} is not what its events fold to:"
                        " edited, or inserted (an earlier version loads the aggregate from it); remove it from the"
                        " store's snapshots table, the events make it again",
                    )
                )
    return found


def _transcoder() -> Transcoder:
    """The application's transcoder (the library's, with the transcodings it registers)."""
    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
        transcoder.register(transcoding)
    return transcoder


def _folded(recorder: LogRecorder, mapper: Mapper[UUID], stream: UUID, versions: set[int]) -> dict[int, Any]:
    """A snapshot of the stream's aggregate at each of `versions` it reaches, as the library projects it."""
    states: dict[int, Any] = {}
    aggregate = None
    for event in _events(recorder, mapper, stream, max(versions)):
        aggregate = event.mutate(aggregate)
        if aggregate is not None and event.originator_version in versions:
            states[event.originator_version] = Snapshot.take(aggregate)
    return states


def _events(recorder: LogRecorder, mapper: Mapper[UUID], stream: UUID, until: int) -> Iterator[Any]:
    for stored in recorder.select_events(stream, lte=until):
        yield mapper.to_domain_event(stored)


def _same(transcoder: Transcoder, topic: str, state: bytes, taken: Snapshot) -> bool:
    """Whether the stored snapshot (`topic`, `state`) holds what `taken` (the fold's snapshot) holds, both
    written by the transcoder (the time each was taken aside)."""
    try:
        stored = transcoder.decode(state)
        return (
            topic == get_topic(type(taken))
            and stored["topic"] == taken.topic
            and transcoder.encode(stored["state"]) == transcoder.encode(taken.state)
        )
    except (ValueError, KeyError, TypeError):
        return False
