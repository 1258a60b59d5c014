"""Moving a log between stores: export as JSON Lines with hashes, import into an empty store.

A line holds the event as people read it (`position`, `stream`, `stream_version`, `type`,
`timestamp`, `data`, `meta`, `hash`, `log_id`), as the log stores it (`topic`, `state`, the
stored document) and the log's chain format (`chain`: the rule its hashes follow, chain.py; a
line without it is of format 1). The last line is the end marker (`end`, `log_id`, `events`,
`head`, `chain`): a file cut at a line boundary is told from a whole one. Import writes the
stored document byte for byte at its position, and the new log takes the chain format, so every
hash, and so the head hash, is the same in the new store; it refuses the whole file, before
writing anything, when a line's hash does not chain or its readable fields do not say what its
stored document says.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from ...domain.errors import DomainError
from ...domain.event_types import event_topics
from ...domain.ids import dashed
from ...domain.open_fold import OpenFold
from ...projections.records import UndecodableEvent, topic_parts
from . import chain
from .log_recorder import StoreNotEmpty
from .port import HashedRow, Imported, LogRecorder, StreamEvents
from .sqlite.walk import PARALLEL_FROM, sqlite_hashed

BATCH = 1_000  # events a transaction, as the baseline writes them
SEAL_KIND = "domain.log:LogSeal"  # the kind projections.records gives a seal's events
SPAN = 20_000  # positions a worker exports at a time


class ImportRefused(DomainError):
    """The file or the target store cannot be imported (the CLI exits 1; nothing is written)."""


def export_lines(
    recorder: LogRecorder,
    after: int = 0,
    until: int | None = None,
    workers: int | None = None,
    smallest: int = PARALLEL_FROM,
) -> Iterator[bytes]:
    """The events after position `after` (up to `until`), one JSON document a line (newline included),
    in position order. (A hash whose event is gone has nothing to move: `log verify` reports it.)

    A long SQLite log (`smallest` events or more) is read in parts of SPAN positions by one process
    per CPU (`workers`), each part's lines handed back in order. The end marker follows the last line."""
    log_id, fmt = recorder.log_id(), recorder.chain_format()
    head = min(recorder.max_notification_id() or 0, until if until is not None else 2**63 - 1)
    count = workers or os.cpu_count() or 1
    where = recorder.file_and_table()  # None: no file to read apart (a server streams it)
    if where is None or count < 2 or head - after < smallest:
        yield from _ended(_lines(recorder.hashed_events(after + 1, until), log_id, fmt), log_id, fmt)
        return
    db, table = where
    spans = [(db, table, lo, hi, log_id, fmt) for lo, hi in _parts(recorder, after, head)]
    with ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("fork")) as pool:
        texts = pool.map(_span_text, spans)
        yield from _ended((line for text in texts for line in text.splitlines(keepends=True)), log_id, fmt)


def _parts(recorder: LogRecorder, after: int, head: int) -> Iterator[tuple[int, int]]:
    """Positions after `after` up to `head` in parts of SPAN, each from an event on: a gap in the positions is
    stepped over (a log whose rows were renumbered by hand, one at 2**63 - 1, made a list of 10**14 parts)."""
    lo = after + 1
    while lo <= head:
        following = recorder.read_rows(lo - 1, 1, {})
        if not following or following[0].id > head:
            return
        lo = following[0].id
        hi = min(lo + SPAN - 1, head)
        yield lo, hi
        lo = hi + 1


def _span_text(span: tuple[str, str, int, int, str | None, int]) -> bytes:
    """In a worker process: the lines of positions lo..hi of a SQLite log, as one text."""
    db, table, lo, hi, log_id, fmt = span
    return b"".join(_lines(sqlite_hashed(db, table, lo, hi), log_id, fmt))


def _ended(lines: Iterable[bytes], log_id: str | None, fmt: int) -> Iterator[bytes]:
    """`lines`, then the export's end marker: how many events up to which position, so that a file cut at a
    line boundary (a copy that did not finish) is not taken for a whole export (load)."""
    count, last = 0, b""
    for line in lines:
        count, last = count + 1, line
        yield line
    head = orjson.loads(last)["position"] if last else None
    marker = {"end": True, "log_id": log_id, "events": count, "head": head, "chain": fmt}
    yield orjson.dumps(marker, option=orjson.OPT_APPEND_NEWLINE)


def _lines(rows: Iterable[HashedRow], log_id: str | None, fmt: int) -> Iterator[bytes]:
    """Each event row as its exported line."""
    streams: dict[Any, str] = {}  # stream id -> its text: a stream has many events
    types: dict[str, str] = {}  # topic -> type
    loads, dumps, newline = orjson.loads, orjson.dumps, orjson.OPT_APPEND_NEWLINE  # (a million times over)
    for position, stream, version, topic, state, stored in rows:
        try:
            raw = state if type(state) is bytes else _bytes_or_text(state)
            data = loads(raw)  # (bytes as stored: no text copy for the parser)
            text = raw.decode() if type(raw) is bytes else raw
            stamp = data.pop("timestamp")["_data_"]
        except (ValueError, KeyError, TypeError) as error:
            raise UndecodableEvent(f"the event at position {position}", error) from None
        if (shown := streams.get(stream)) is None:
            shown = streams[stream] = dashed(chain.stream_hex(stream))
        if (kind := types.get(topic)) is None:
            kind = types[topic] = topic_parts(topic)[1]
        data.pop("originator_topic", None)
        if "config_id" in data:
            data["config_id"] = data["config_id"]["_data_"]
        meta = data.pop("meta", None) or {}
        yield dumps(
            {
                "position": position,
                "stream": shown,
                "stream_version": version,
                "type": kind,
                "timestamp": stamp,
                "data": data,
                "meta": meta,
                "hash": stored,
                "log_id": log_id,
                "topic": topic,
                "state": text,
                "chain": fmt,
            },
            option=newline,
        )


def _bytes_or_text(state: str | bytes | memoryview) -> bytes | str:
    """A stored document as the parser takes it (a hand-edited row may hold text; a driver, a memoryview)."""
    return state if isinstance(state, str) else bytes(state)


def readable(topic: str, text: str) -> dict[str, Any]:
    """What a stored document says, as export shows it (as `events -o json` does, records.document):
    type, timestamp, data (without the timestamp and class topic, config_id as hex), meta."""
    data = orjson.loads(text)
    stamp = data.pop("timestamp")["_data_"]
    data.pop("originator_topic", None)
    if "config_id" in data:
        data["config_id"] = data["config_id"]["_data_"]
    meta = data.pop("meta", None) or {}
    return {"type": topic_parts(topic)[1], "timestamp": stamp, "data": data, "meta": meta}


@dataclass
class Checked:
    """What the lines read so far hold, each one checked."""

    events: int = 0
    unchained: int = 0  # events with no hash: their log held them before its chain began
    head: int = 0
    head_hash: str = chain.ZERO
    log_id: str | None = None
    chain_format: int = chain.LEGACY  # the rule the lines' hashes follow (chain.py), as their first says
    ended: bool = False  # whether the lines end with the export's end marker (else the file was cut)
    versions: dict[str, int] = field(default_factory=dict)  # each stream's last version so far
    last: tuple[str, str, dict[str, Any]] = ("", "", {})  # the last event's kind, type and data
    deployments: OpenFold = field(default_factory=OpenFold)  # the phase each deployment is left in
    fold: OpenFold | None = None  # the same, when a fork must fail those left open

    @property
    def sealed(self) -> bool:
        """Whether the lines end with their log's seal (a move; else a backup or a live copy)."""
        kind, type_, data = self.last
        return kind == SEAL_KIND and type_ == "Sealed" and data.get("log_id") == self.log_id


# A position or a version at most: both stores keep up to 2**63-1, and a log must have room to go on
# (a head at 2**63-1 left SQLite to put the next event below it, and PostgreSQL's sequence spent)
LARGEST = 2**62


def load(
    recorder: LogRecorder,
    lines: Iterable[str],
    progress: Callable[[int], None] = lambda _: None,
    batch: int = BATCH,
    *,
    ending: Callable[[Checked, StreamEvents], list[StoredEvent]] | None = None,
    fork: bool = False,
) -> Checked:
    """Check and insert every line in one pass and ONE transaction, then the events `ending` makes
    (the origin; with `fork`, the open deployments failed): the first line that does not hold (or an
    empty file, or a store that is not empty, or an export cut or without its seal unless `fork`) raises
    ImportRefused and nothing is written. The recorder chains the events as it inserts them; the
    store keeps its own log id (a move is not a copy: the new log is another log)."""
    found = Checked()
    found.fold = found.deployments if fork else None
    events = checked(lines, found)
    first = list(itertools.islice(events, 1))  # (its chain format is the new log's, from the first insert on)

    def batches() -> Iterator[list[Imported]]:
        pending: list[Imported] = []
        for event in itertools.chain(first, events):
            stored = StoredEvent(UUID(event["stream"]), event["stream_version"], event["topic"], event["state"])
            pending.append(Imported(event["position"], stored, event["hash"] is not None))
            if len(pending) == batch:
                yield pending
                progress(len(pending))
                pending = []
        if pending:
            yield pending
            progress(len(pending))
        _refuse_unless_whole(found, fork)

    def tail(read: StreamEvents) -> list[StoredEvent]:
        return ending(found, read) if ending is not None else []

    try:
        recorder.import_events(batches(), tail, found.chain_format)
    except StoreNotEmpty as error:
        raise ImportRefused(f"{error}: import into an empty one") from None
    return found


def _refuse_unless_whole(found: Checked, fork: bool) -> None:
    """ImportRefused unless the lines read (`found`) are a move: a whole export (its end marker), sealed, with
    no deployment left open; with `fork`, any export that holds events."""
    if not found.events:
        raise ImportRefused("the file holds no event: nothing to import")
    if not fork and not found.ended:
        raise ImportRefused(
            f"the export of log {found.log_id} ends at position {found.head} without its end marker: the file"
            " was cut (a copy that did not finish, or lines removed from its end), or written before exports"
            " had one. To start a new log from what it holds, import it with --fork (its open deployments fail)"
        )
    if not fork and not found.sealed:
        raise ImportRefused(
            f"the export of log {found.log_id} ends at position {found.head} without its seal: two live"
            " copies of a log would each run its deployments. To move a log, export it with"
            " `rollouts log export --seal` (its source then refuses writes); to start a new log from"
            " this copy while the source goes on, import it with --fork (its open deployments fail)"
        )
    running = found.deployments.left_open()
    if not fork and running:
        # `log export --seal` refuses to seal such a log: this seal was made otherwise (a seal line is
        # no secret: anyone can append one, chained, to a backup), and a move of it would leave two
        # live copies, each holding the same claims
        config, revision = running[0]
        raise ImportRefused(
            f"the export of log {found.log_id} ends with a seal while {config} revision {revision}"
            f" {'and others are' if len(running) > 1 else 'is'} New, Pending or Running, which"
            " `rollouts log export --seal` refuses: it is not a move. To start a new log from this copy,"
            " import it with --fork (its open deployments fail)"
        )


def checked(lines: Iterable[str], found: Checked) -> Iterator[dict[str, Any]]:
    """The lines' events, each checked against the one before it (`found` says how far it got);
    refuses at the first that does not hold. `state` comes out as the stored bytes."""
    chained = False
    for number, event in enumerate(parse(lines), start=1):
        if "end" in event:
            _check_end(event, found, number)
            continue
        where = f"line {number} (position {event['position']})"
        if not found.head < event["position"] <= LARGEST:
            raise ImportRefused(f"{where}: positions must increase (up to 2**62)")
        if found.events and event.get("log_id") != found.log_id:
            raise ImportRefused(f"{where}: another log id than the lines before it")
        stream, version = event["stream"], event["stream_version"]
        if not found.versions.get(stream, 0) < version <= LARGEST:
            raise ImportRefused(f"{where}: stream {stream}'s versions must increase, from 1 (up to 2**62)")
        text, topic = event["state"], event["topic"]
        if topic not in event_topics():
            raise ImportRefused(f"{where}: {topic!r} is not a topic of this program's events")
        try:
            expected = readable(topic, text)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise ImportRefused(f"{where}: the stored record is not an event document ({error})") from None
        if not _aware(expected["timestamp"]):
            raise ImportRefused(f"{where}: the timestamp is not a time with its UTC offset")
        for name, value in expected.items():
            if event.get(name) != value:
                raise ImportRefused(f"{where}: {name} differs from what the stored record says")
        event["state"] = text.encode()
        fmt = event.get("chain", chain.LEGACY)
        if type(fmt) is not int or fmt not in chain.FORMATS or (found.events and fmt != found.chain_format):
            raise ImportRefused(f"{where}: chain format {fmt!r}: not the lines' before it, or one this program lacks")
        found.chain_format = fmt
        position = chain.at_position(event["position"], fmt)
        computed = chain.link(found.head_hash, stream, version, topic, event["state"], position)
        if event["hash"] is None and chained:
            raise ImportRefused(f"{where}: an event without a hash after the chain began")
        if event["hash"] is not None and event["hash"] != computed:
            if not found.events and event["position"] > 1:  # (the first event of a log chains from zero)
                raise ImportRefused(
                    f"{where}: the file starts past the log's first event (an export with --after?), or its"
                    " first line was changed: a log is imported whole, from `rollouts log export` without --after"
                )
            raise ImportRefused(f"{where}: the hash does not chain: this line or one before it was changed")
        chained = chained or event["hash"] is not None
        found.events += 1
        found.unchained += event["hash"] is None
        found.head, found.head_hash, found.log_id = event["position"], computed, event.get("log_id")
        found.versions[stream] = version
        kind = topic_parts(topic)[0]
        found.last = (kind, expected["type"], expected["data"])
        found.deployments.feed(stream, kind, expected["type"], expected["data"])
        yield event


def _check_end(marker: dict[str, Any], found: Checked, number: int) -> None:
    """The end marker at line `number` against the lines before it: ImportRefused unless it names them."""
    said = (marker.get("log_id"), marker.get("events"), marker.get("head"), marker.get("chain", chain.LEGACY))
    if said != (found.log_id, found.events, found.head or None, found.chain_format):
        raise ImportRefused(
            f"line {number}: the end marker says {said[1]!r} events of log {said[0]} up to position {said[2]!r},"
            f" the lines before it hold {found.events} up to {found.head}: lines were removed, added or changed"
        )
    found.ended = True


def _aware(stamp: object) -> bool:
    """Whether `stamp` is an ISO time with its offset (as every event is stamped: the views compare them)."""
    try:
        return isinstance(stamp, str) and datetime.fromisoformat(stamp).tzinfo is not None
    except ValueError:
        return False


def parse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """Each line's document: an event's, and last the end marker's (ImportRefused at any line after it)."""
    ended = False
    for number, line in _numbered(lines):
        if not line.strip():
            continue
        if ended:
            raise ImportRefused(f"line {number}: a line after the export's end marker")
        try:
            event = orjson.loads(line)
            if type(event) is dict and event.get("end") is True:
                ended = True
                yield event
                continue
            event["position"], event["stream_version"] = int(event["position"]), int(event["stream_version"])
            if str(UUID(event["stream"])) != event["stream"]:
                raise ValueError("a stream id is written as export writes it: lower-case, dashed")
            if not isinstance(event["state"], str) or not isinstance(event["topic"], str):
                raise TypeError("state and topic must be text")
        except (orjson.JSONDecodeError, ValueError, KeyError, TypeError) as error:
            raise ImportRefused(f"line {number}: not an exported event ({error})") from None
        yield event


def _numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """`lines` numbered from 1; ImportRefused at one that is not text (a file read as UTF-8)."""
    found = iter(lines)
    number = 0
    while True:
        number += 1
        try:
            line = next(found)
        except StopIteration:
            return
        except UnicodeDecodeError as error:
            raise ImportRefused(f"line {number}: not UTF-8 text ({error.reason})") from None
        yield number, line
