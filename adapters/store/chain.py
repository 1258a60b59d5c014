"""The hash chain over the log (I8): how an event's hash is made, and how a whole log is checked.

Each event's hash is SHA-256 over the hash before it, the event's position and its whole stored record
(stream id, stream version, type, stored payload): a log moved to another store keeps its positions, and
so its hashes. A log made before positions were chained (chain format 1, LEGACY) keeps its rule: its hash
leaves the position out. Each log records its format (log_recorder.read_identity), and an export carries
it. An event without its hash is a break, wherever it is: removing the chain's
rows must not turn tamper evidence off (a log written before the chain existed is chained anew by
`log export` and `log import --fork`). A write after such events chains from the fold over them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

ZERO = "0" * 64  # the hash "before" the first event of a log
LEGACY = 1  # the chain format of logs made before positions were chained: a hash leaves the position out
POSITIONED = 2  # a hash covers the event's position too (DESIGN 7.11): every log made from now on
FORMATS = (LEGACY, POSITIONED)
Linkable = tuple[Any, ...]  # position, stream, version, topic, state (as a driver gives them)


def stream_hex(stream: UUID | str) -> str:
    """A stream id as the 32 hex digits SQLite stores (PostgreSQL hands out UUIDs)."""
    return stream.hex if isinstance(stream, UUID) else stream.replace("-", "")


def link(previous: str, stream: UUID | str, version: int, topic: str, state: bytes, position: int | None = None) -> str:
    """The hash of one stored event that follows `previous`; given its `position` (a POSITIONED log's
    rule), the hash covers that too (at_position says which a log's format wants)."""
    where = "" if position is None else f"{position}\n"
    digest = hashlib.sha256(f"{previous}\n{where}{stream_hex(stream)}\n{version}\n{topic}\n".encode())
    digest.update(state.encode() if isinstance(state, str) else state)  # a hand-edited row may hold text
    return digest.hexdigest()


def at_position(position: int, fmt: int) -> int | None:
    """What link() takes as the position of an event of a log of format `fmt` (LEGACY: none)."""
    return None if fmt == LEGACY else position


def fold(previous: str, records: Iterable[Linkable], fmt: int) -> str:
    """The hash after `records` (position, stream, version, topic, state), chained from `previous`."""
    for digest in hashes_after(previous, records, fmt):
        previous = digest
    return previous


@dataclass(frozen=True)
class Break:
    position: int
    problem: str

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "problem": self.problem}


@dataclass
class ChainVerdict:
    """What a walk of the log from position zero found."""

    events: int = 0
    unchained: int = 0
    head: int = 0
    head_hash: str | None = ZERO  # None: the last row was a kept hash with no value (see verify)
    hash_at: dict[int, str | None] = field(default_factory=dict)  # the positions asked for, as found
    breaks: list[Break] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.breaks


def verify(
    rows: Iterable[tuple[int, Any, int, str, bytes, str | None]],
    keep: int | None = None,
    start: str = ZERO,
    *,
    fmt: int,
) -> ChainVerdict:
    """Recompute the chain over (position, stream, version, topic, state, stored hash) in position order.

    A row with no stream is a hash kept for an event that is gone; a row with no stored hash is an event
    without its chain record (a run of them is one break, at its first position). A mismatch is reported
    where it shows; the walk goes on from the stored hash (from the computed one past an event without any),
    so each later break is reported where it is, not as a cascade. `keep` is a position whose hash the verdict
    keeps (`--expect-head`); a part of the log is walked from the hash stored before it (`start`); `fmt` is
    the log's chain format. The loop is link() inlined: it runs once per event of the log."""
    verdict = ChainVerdict()
    # None after a kept hash that is itself gone (edited to NULL, its event removed): said, not invented
    running: str | None = start
    count, position = 0, 0
    missing: list[int] = []  # the run of events without a hash walked last: [first, last, how many]
    sha = hashlib.sha256
    positioned = fmt != LEGACY
    for position, stream, version, topic, state, stored in rows:
        if missing and stored is not None:
            verdict.breaks.append(_unhashed(*missing))
            missing = []
        if stream is None:
            verdict.breaks.append(Break(position, "event removed: its hash is kept but the event is gone"))
            running = running if stored is None else stored
            continue
        count += 1
        # As stored: a SQLite log holds 32 hex digits, and the same id written another way (dashed, say) is
        # another stream to every query by id (the aggregates would not see the event): not the hashed record.
        try:
            ident = stream if type(stream) is str else stream_hex(stream)
            where = f"{position}\n" if positioned else ""
            digest = sha(f"{running}\n{where}{ident}\n{version}\n{topic}\n".encode())
            digest.update(state.encode() if type(state) is str else state)
        except (TypeError, AttributeError):  # a row edited to hold another type: a BLOB id, a NULL or a number
            verdict.breaks.append(Break(position, f"{ODD}: the row was changed"))
            running = running if stored is None else stored
            continue
        except UnicodeEncodeError:  # text that is not UTF-8 (a hand edit), its bytes kept by the walk: hash them
            digest = sha(f"{running}\n{where}{ident}\n{version}\n{topic}\n".encode(errors="surrogateescape"))
            digest.update(state.encode(errors="surrogateescape") if type(state) is str else state)
        computed = digest.hexdigest()
        if stored is None:
            verdict.unchained += 1
            missing = [missing[0], position, missing[2] + 1] if missing else [position, position, 1]
            running = computed
        else:
            if stored != computed:
                verdict.breaks.append(Break(position, MISMATCH))
            running = stored
        if position == keep:
            verdict.hash_at[position] = running
    if missing:
        verdict.breaks.append(_unhashed(*missing))
    verdict.events, verdict.head, verdict.head_hash = count, position, running
    return verdict


ODD = "the stored record is not an event's (its stream id or its data is of another type)"
MISMATCH = "hash mismatch: this event, or the one before it, was changed, removed or reordered"


def _unhashed(first: int, last: int, count: int) -> Break:
    """One break for a run of `count` events without their chain record, from `first` to `last`."""
    if count == 1:
        return Break(first, "event has no chain record: its hash was removed, or it was inserted without one")
    return Break(
        first,
        f"events {first}..{last} ({count}) have no chain record: their hashes were removed, or they were"
        " inserted without one",
    )


def hashes_after(previous: str, records: Iterable[Linkable], fmt: int) -> Iterator[str]:
    """The hash of each record (position, stream, version, topic, state) in turn, chained from `previous`
    by the rule of chain format `fmt`."""
    for position, stream, version, topic, state in records:
        previous = link(previous, stream, version, topic, state, at_position(position, fmt))
        yield previous


def joined(parts: list[ChainVerdict]) -> ChainVerdict:
    """The verdict of consecutive parts of one log, walked apart."""
    whole = ChainVerdict()
    for part in parts:
        whole.events += part.events
        whole.unchained += part.unchained
        whole.breaks += part.breaks
        whole.hash_at.update(part.hash_at)
        if part.events:
            whole.head, whole.head_hash = part.head, part.head_hash
    return whole
