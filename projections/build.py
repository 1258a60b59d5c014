"""Folding the log from zero into new projection files: one pass for all, a writer thread, no journal.

The files are private until the caller points the catalog at them: nothing else reads or
writes them, so the folds keep the rows they have seen from batch to batch, SQLite keeps no
journal, and a crash leaves only files that nothing points to. Events that no fold looks
at are read but not decoded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import sqlite_utils

from projections import files
from projections.audit_sql import Unreadable
from projections.files import Tracked
from projections.projection import Fold, Projection
from projections.records import Notification, Record, decode, decode_stamped, topic_parts
from projections.source import EventSource, LocalLog, SQLiteLog
from projections.writer import Writer

FLUSH = 100_000  # positions between two writes of the rows the folds changed
REBUILD_BATCH = 2_000  # events read at a time: few enough that a batch's records stay in the CPU's caches
Progress = Callable[[int, int], None]


def build(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    batch: int,
    progress: Progress | None = None,
) -> int:
    """Fold `source` up to at least `head`, reading `batch` events at a time, into new files at `paths`.

    Returns the position reached. On any error the files are removed."""
    log = source.sqlite_log() if isinstance(source, LocalLog) else None
    try:
        return _build(source, projections, paths, head, log_id, batch, progress, log)
    except Unreadable:
        return _build(source, projections, paths, head, log_id, batch, progress, None)


def _build(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    batch: int,
    progress: Progress | None,
    log: SQLiteLog | None,
) -> int:
    dbs: dict[str, sqlite_utils.Database] = {}
    folds: list[Fold] = []
    try:
        for p in projections:
            dbs[p.name] = db = files.create_unjournaled(paths[p.name])
            p.create(db)
            files.track(db, p.name, Tracked(p.version, 0, log_id))
        with Writer() as writer:
            for p in projections:  # outside any transaction: a fold may attach the log
                db = dbs[p.name]
                folds.append(p.fold_from_zero(db, writer.sink(db.conn), source, head, log))
            for db in dbs.values():
                db.execute("BEGIN")
            at = fold_all(source, folds, head, batch, progress)
        for p in projections:
            files.track(dbs[p.name], p.name, Tracked(p.version, at, log_id))
            dbs[p.name].execute("COMMIT")
        for fold in folds:
            fold.close()
        for p in projections:
            files.seal(dbs.pop(p.name), paths[p.name])
    except BaseException:
        for fold in folds:
            fold.close()
        for db in dbs.values():
            db.close()
        for path in paths.values():
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        raise
    return at


class Wanted(dict[str, Callable[[Notification], Record] | None]):
    """How the events of a topic are decoded for the folds: not at all when none looks at them,
    without their data when none reads it, else in full."""

    def __init__(self, folds: Sequence[Fold]) -> None:
        super().__init__()
        self.folds = folds

    def __missing__(self, topic: str) -> Callable[[Notification], Record] | None:
        kind, type_ = topic_parts(topic)
        wanting = [f for f in self.folds if f.wants(kind, type_)]
        how = (decode if any(f.needs_data(kind, type_) for f in wanting) else decode_stamped) if wanting else None
        self[topic] = how
        return how


def fold_all(source: EventSource, folds: Sequence[Fold], head: int, batch: int, progress: Progress | None) -> int:
    wanted = Wanted(folds)
    at = flushed = 0
    while at < head:
        notifications = source.read(at, batch)
        if not notifications:
            break
        records = [how(n) for n in notifications if (how := wanted[n.topic])]
        at = notifications[-1].id
        for fold in folds:
            fold.apply(records)
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
