"""Walking a SQLite log with connections of its own: in parts, each in a worker process (log verify, export)."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .. import chain
from ..failures import not_utf8
from ..log_recorder import merge
from ..port import CHAIN_TABLE, HashedRow, Part

# Events from which `log verify` walks the log in parts, a forked process each: a fork costs a few ms, a walk
# about 3 us an event (20,045 events on two cores: 64 ms in one walk, 46 in two parts; read + hashlib 37)
PARALLEL_FROM = 10_000
_MMAP_BYTES = 1 << 30  # a long read's connection maps up to this much of the file


def verify_part(part: Part, keep: int | None) -> chain.ChainVerdict:
    """In a worker process: the chain over one part of the log."""
    walk = sqlite_walk(part.db, part.table, part.lo, part.hi)
    return chain.verify(walk, keep, part.start, fmt=part.fmt)


_SQLITE_HASHED = (
    "SELECT e.rowid, e.originator_id, e.originator_version, e.topic, e.state, h.hash"
    " FROM {0} e LEFT JOIN {1} h ON h.position = e.rowid WHERE e.rowid BETWEEN ? AND ? ORDER BY e.rowid"
)


def sqlite_hashed(db: str, table: str, lo: int, hi: int | None) -> Iterator[HashedRow]:
    """Events lo..hi of a SQLite log joined with their hashes, in position order (one statement: one snapshot)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:  # (opening the log made the chain table, so it is there)
        conn.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")  # the join probes the chain's pages: map, don't read them
        yield from conn.execute(_SQLITE_HASHED.format(table, CHAIN_TABLE), (lo, 2**63 - 1 if hi is None else hi))
    finally:
        conn.close()


def sqlite_walk(db: str, table: str, lo: int, hi: int | None) -> Iterator[tuple[Any, ...]]:
    """Events lo..hi (hi None: to the end) and their hashes, two ordered scans of one snapshot, merged.

    SQLite keeps any bytes as text, and sqlite3 refuses to read text that is not UTF-8 (only a hand edit
    leaves it): from such a row on, the walk reads text with its bytes kept (as surrogates, `as_stored`),
    and chain.verify hashes those bytes, so the chain breaks where the row is. sqlite3's own decoding
    stays for the rest (a decoder of ours on every value costs ~50% more CPU in the scans)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    top = 2**63 - 1 if hi is None else hi
    walked = lo - 1  # the last position yielded: all rows up to it are
    try:
        conn.execute("BEGIN")  # one snapshot for both scans (and for a second read past text that is not UTF-8)
        try:
            for row in _merged(conn, table, lo, top):
                yield row
                walked = row[0]
        except sqlite3.OperationalError as error:
            if not_utf8(error) is None:
                raise
            conn.text_factory = as_stored
            yield from _merged(conn, table, walked + 1, top)
    finally:
        conn.close()


def as_stored(raw: bytes) -> str:
    """Stored text as it is, bytes that are not UTF-8 kept as surrogates (chain.verify hashes them back)."""
    return raw.decode("utf-8", "surrogateescape")


def _merged(conn: sqlite3.Connection, table: str, lo: int, top: int) -> Iterator[tuple[Any, ...]]:
    events = conn.execute(
        f"SELECT rowid, originator_id, originator_version, topic, state FROM {table}"
        " WHERE rowid BETWEEN ? AND ? ORDER BY rowid",
        (lo, top),
    )
    try:
        hashes: Iterable[tuple[int, str]] = conn.execute(
            f"SELECT position, hash FROM {CHAIN_TABLE} WHERE position BETWEEN ? AND ? ORDER BY position", (lo, top)
        )
    except sqlite3.OperationalError:  # a log made before the chain
        hashes = ()
    return merge(events, hashes)


def cut(
    query: Callable[[str, tuple[int, ...]], Sequence[Sequence[Any]]],
    db: str,
    table: str,
    count: int,
    smallest: int,
    fmt: int,
) -> list[Part] | None:
    """The log cut into `count` consecutive parts that can be walked apart (each from the hash stored
    before it), or None when it is small or does not start chained (a walk from zero is needed)."""
    rows = query(
        f"SELECT (SELECT min(rowid) FROM {table}), (SELECT max(rowid) FROM {table}),"
        f" (SELECT min(position) FROM {CHAIN_TABLE}), (SELECT max(position) FROM {CHAIN_TABLE})",
        (),
    )
    if not rows or None in tuple(rows[0]) or count < 2:
        return None
    first, last, first_hashed, last_hashed = rows[0]
    if first != first_hashed or last - first < smallest:
        return None
    end = max(last, last_hashed)
    bounds = [first + i * (end - first + 1) // count for i in range(count)] + [end + 1]
    parts = []
    for lo, hi in itertools.pairwise(bounds):
        try:
            before = query(f"SELECT hash FROM {CHAIN_TABLE} WHERE position < ? ORDER BY position DESC LIMIT 1", (lo,))
        except Exception as error:
            if not_utf8(error) is None:
                raise
            return None  # that hash was edited to text that is not UTF-8: one walk reports it where it is
        if lo != first and not before:
            return None
        parts.append(Part(db, table, lo, hi - 1, before[0][0] if lo != first else chain.ZERO, fmt))
    return parts
