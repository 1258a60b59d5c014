"""Folding the log from zero into new projection files in this process: one pass for all, a writer
thread, no journal (see build for who calls it, and build_worker for the process that does it too).

The files are private until the caller points the catalog at them: nothing else reads or
writes them, so the folds keep the rows they have seen from batch to batch, SQLite keeps no
journal, and a crash leaves only files that nothing points to. Events that no fold looks
at are read but not decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from . import files
from .files import Tracked
from .log_file import LogFile, Make
from .projection import Fold, Progress, Projection, fold_batch
from .records import Record, decode, decode_stamped, record, record_stamped, topic_parts
from .source import DirectLog, EventSource, PostgresLog
from .writer import Writer

if TYPE_CHECKING:
    import sqlite_utils

    from .pg_log import PostgresLogFile

FLUSH = 100_000  # positions between two writes of the rows the folds changed
Decoder = Callable[..., Record]  # a notification, or a row of the log read directly (log_file.Make), to a Record


def remove_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def fold_into_files(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    batch: int,
    progress: Progress | None,
    log: DirectLog,
    indexes: bool = True,
) -> int:
    dbs: dict[str, sqlite_utils.Database] = {}
    folds: list[Fold] = []
    reader = open_log(log)
    try:
        for p in projections:
            dbs[p.name] = db = files.create_unjournaled(paths[p.name], p.page_size)
            p.create(db)
            files.track(db, p.name, Tracked(p.version, 0, log_id))
        with Writer() as writer:
            # From PostgreSQL, SQLite makes the audit rows from copies of the log's rows (audit_staged): a
            # second read of the log, and a thread that wants a core of its own. Worth it only where this
            # process has no Python fold to run meanwhile (see _parallel).
            staged = log if not isinstance(log, PostgresLog) or len(projections) == 1 else None
            deferred = {name: defer_indexes(db) for name, db in dbs.items()}  # made once the rows are in
            for p in projections:  # outside any transaction: a fold may attach the log
                db = dbs[p.name]
                folds.append(p.fold_from_zero(db, writer.sink(db.conn), source, head, staged))
            for db in dbs.values():
                db.execute("BEGIN")
            at = fold_all(reader or source, folds, head, batch, progress)
        for name, statements in deferred.items():
            if indexes:
                files.make_indexes(dbs[name], statements, name, paths[name])
        for p in projections:
            files.track(dbs[p.name], p.name, Tracked(p.version, at, log_id))
            dbs[p.name].execute("COMMIT")
        for fold in folds:
            fold.close()
        for p in projections:
            files.seal(dbs.pop(p.name), paths[p.name])
    except BaseException:
        if reader is not None:
            reader.close()
        for fold in folds:
            fold.close()
        for db in dbs.values():
            db.close()
        for path in paths.values():
            remove_files(path)
        raise
    if reader is not None:
        reader.close()
    return at


def defer_indexes(db: sqlite_utils.Database) -> list[str]:
    """Drop the indexes of `db` that enforce nothing (not UNIQUE), and return the statements that make them
    again: made once its tables are full, sorted once, they cost a rebuild far less than kept row by row."""
    found = db.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND sql NOT LIKE 'CREATE UNIQUE%'"
    ).fetchall()
    for name, _ in found:
        db.execute(f'DROP INDEX "{name}"')
    return [sql for _, sql in found]


def open_log(log: DirectLog) -> LogFile | PostgresLogFile | None:
    """A reader of the log by position range, with a connection of its own (None: read the source)."""
    if log is None:
        return None
    if isinstance(log, PostgresLog):
        from .pg_log import (
            PostgresLogFile,  # start-up cost: psycopg loads for a PostgreSQL log alone
        )

        return PostgresLogFile(log)
    return LogFile(log)


class TopicDecoders(dict[str, Decoder | None]):
    """How the events of a topic are decoded for the folds: not at all (None) when none looks at
    them, without their data (`stamped`) when none reads it, else in `full`."""

    def __init__(
        self,
        folds: Sequence[Fold],
        full: Decoder = decode,
        stamped: Decoder = decode_stamped,
    ) -> None:
        super().__init__()
        self.folds = folds
        self.full = full
        self.stamped = stamped
        self.skipped: list[str] = []  # the topics seen that no fold wants

    def __missing__(self, topic: str) -> Decoder | None:
        if not isinstance(topic, str):  # a row edited to hold a NULL or a number: decoded, so that it is refused
            return self.full
        kind, type_ = topic_parts(topic)
        wanting = [f for f in self.folds if f.wants(kind, type_)]
        how = (self.full if any(f.needs_data(kind, type_) for f in wanting) else self.stamped) if wanting else None
        self[topic] = how
        if how is None:
            self.skipped.append(topic)
        return how


@runtime_checkable
class LogRecords(Protocol):
    """A reader of the log itself (LogFile, PostgresLogFile), not an EventSource: it makes the records."""

    def records(self, after: int, upto: int, wanted: Mapping[str, Make | None], skipped: list[str]) -> list[Record]: ...

    def first_after(self, after: int) -> int | None: ...


def fold_all(
    source: EventSource | LogFile | PostgresLogFile,
    folds: Sequence[Fold],
    head: int,
    batch: int,
    progress: Progress | None,
) -> int:
    """Offer every event to `folds`, `batch` at a time: all of the log to `head` (and a little past,
    from an EventSource; exactly to it from a reader of the log itself)."""
    at = flushed = 0
    reader = source if isinstance(source, LogRecords) else None  # a LogFile or a PostgresLogFile: the log itself
    direct = reader is not None
    wanted = TopicDecoders(folds, record, record_stamped) if direct else TopicDecoders(folds)
    # Folds that read the log themselves want no record: past the first batch (whose topics SQLAuditFold
    # lists for SQLite to look up), only the positions are offered to them.
    unread = direct and all(fold.reads_itself for fold in folds)
    first = True
    while at < head:
        if reader is not None:
            # A gap in the positions is stepped over, not walked a batch at a time: a log whose rows were
            # renumbered by hand (one at position 2**63 - 1) kept every read command busy for hours.
            following = reader.first_after(at)
            at = head if following is None else min(max(at, following - 1), head)
            upto = min(at + batch, head)
            reading = first or not unread
            records = reader.records(at, upto, wanted, wanted.skipped) if reading else []
            at, first = upto, False
        else:
            notifications = source.read(at, batch)
            if not notifications:
                break
            records = [how(n) for n in notifications if (how := wanted[n.topic])]
            at = notifications[-1].id
        for fold in folds:
            fold_batch(fold, records)
            fold.reached(at)
        if at - flushed >= FLUSH:
            flushed = at
            for fold in folds:
                fold.flush()
        if progress:
            progress(at, head)
    for fold in folds:
        fold.finish()
    return at
