"""What both chained recorders share: the errors an append or an import raises, the rows they hand out, and
the merge of events with their hashes (their base, ChainedLog, is in opening.py).

Each recorder (sqlite/recorder.py, postgres/recorder.py) is the library's, extended: every insert chains its
events' hashes, and a log knows its id. The hashes go to a table of their own (`rollouts_chain`: position,
hash), written in the very transaction that inserts the events. The previous hash is read there too, after
the insert: on SQLite the insert holds the database's write lock, on PostgreSQL the library's LOCK TABLE ...
IN EXCLUSIVE MODE, so no other writer can slip an event in between. The log's id and chain format
(`rollouts_log`) are written once, when the tables are created (opens are serialised by the home's lock or an
advisory lock), never on an ordinary open; an import gives its empty store the format of the log it imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError, StoredEvent

from ...domain.errors import DomainError
from . import chain
from .port import Imported

BATCH = 5_000  # rows a server-side cursor fetches at a time
CLAIM_TOPIC = "%.DeployerClaimed"


Guards = Sequence[tuple[UUID, int]]  # streams a decision read but does not write, and the version it read


class ReadGuardBroken(IntegrityError):
    """A stream that a decision read (and does not write) changed before the decision was saved: decide again."""


def check_guards(found: Sequence[tuple[UUID, int | None]], guards: Guards) -> None:
    for (stream, version), (_, now) in zip(guards, found, strict=True):
        if (now or 0) != version:
            raise ReadGuardBroken(f"stream {stream} moved from version {version} to {now} meanwhile")


def chained(
    last: tuple[int, str] | None,
    ids: Sequence[int],
    stored_events: Sequence[StoredEvent],
    fmt: int,
    gap: Callable[[int, int], Iterable[chain.Linkable]],
) -> list[tuple[int, str]]:
    """The chain rows (position, hash) of `stored_events` at `ids`, after `last` (the chain's last row; None:
    none). The events between the two (`gap(after, first)`: written before the chain, or without it) are
    covered from here on; a PostgreSQL sequence may skip ids, and then the gap is empty."""
    after, previous = (last[0], last[1]) if last else (0, chain.ZERO)
    if after < ids[0] - 1:
        previous = chain.fold(previous, gap(after, ids[0]), fmt)
    records = [
        (p, s.originator_id, s.originator_version, s.topic, s.state) for p, s in zip(ids, stored_events, strict=True)
    ]
    return list(zip(ids, chain.hashes_after(previous, records, fmt), strict=True))


def chained_part(batch: Sequence[Imported]) -> tuple[list[int], list[StoredEvent]]:
    """The positions and events of `batch` that their log chained (the others came before its chain)."""
    found = [(i.position, i.event) for i in batch if i.chained]
    return [p for p, _ in found], [e for _, e in found]


class LogSealed(DomainError):
    """The log is sealed (moved elsewhere): it takes no more events (the CLI exits 1; nothing is written)."""

    def __init__(self, log_id: str, position: int) -> None:
        super().__init__(
            f"the log {log_id} is sealed (position {position}): it takes no write and no claim; reads still work"
            " (it moved: use the store its export was imported into)"
        )
        self.position = position


class HeadMoved(IntegrityError):
    """The log went on past the head a decision read (a seal decides on the whole log): decide again."""


class StoreNotEmpty(Exception):
    """An import's target already holds events (nothing was written)."""

    def __init__(self, head: int) -> None:
        super().__init__(f"the store is not empty (its log ends at position {head})")
        self.head = head


def merge(events: Iterable[Any], hashes: Iterable[tuple[int, str]]) -> Iterator[tuple[Any, ...]]:
    """Events and chain rows, both in position order, joined on position (a hash alone: stream None)."""
    pending = iter(hashes)
    hashed = next(pending, None)
    for event in events:
        position = event[0]
        while hashed is not None and hashed[0] < position:
            yield (hashed[0], None, None, None, None, hashed[1])
            hashed = next(pending, None)
        if hashed is not None and hashed[0] == position:
            yield (*event, hashed[1])
            hashed = next(pending, None)
        else:
            yield (*event, None)
    while hashed is not None:
        yield (hashed[0], None, None, None, None, hashed[1])
        hashed = next(pending, None)


def first_value(rows: Sequence[Any]) -> Any:  # why: a column of any type, from a tuple or a dict row
    if not rows:
        return None
    row = rows[0]
    return next(iter(row.values())) if isinstance(row, dict) else row[0]
