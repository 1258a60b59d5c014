"""Folding the log from zero into new projection files: in this process (fold_files), or, from a large
log that can be read directly, shared with a worker process (build_worker)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .audit_sql import Unreadable
from .fold_files import fold_into_files, remove_files
from .projection import Progress, Projection
from .source import EventSource, PostgresLog, SQLiteLog, direct_log

if TYPE_CHECKING:
    from pathlib import Path

PARALLEL_FROM = 50_000  # events: below, a process's start costs about what it saves
REBUILD_BATCH = 2_000  # events read at a time: few enough that a batch's records stay in the CPU's caches


def build(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    batch: int,
    progress: Progress | None = None,
    indexes: bool = True,
) -> int:
    """Fold `source` up to at least `head`, reading `batch` events at a time, into new files at `paths`.

    Returns the position reached. Without `indexes`, the files lack the indexes that enforce nothing
    (a fold read once by key, as audit's, has no use for them). On any error the files are removed.
    From a log of PARALLEL_FROM events or more that a rebuild can read itself (a local SQLite file,
    or PostgreSQL), every projection but the last is folded by another process (see build_worker),
    which reads the log itself, while this one folds the last (the audit view, which SQLite builds
    in a thread of its own, see audit_sql and audit_staged): the Python folds and SQLite's share no
    GIL."""
    log = direct_log(source)
    try:
        if log is not None and len(projections) > 1 and head >= PARALLEL_FROM:
            return _parallel(source, projections, paths, head, log_id, batch, progress, log)
        return fold_into_files(source, projections, paths, head, log_id, batch, progress, log, indexes)
    except Unreadable:
        return fold_into_files(source, projections, paths, head, log_id, batch, progress, None, indexes)


def _parallel(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    batch: int,
    progress: Progress | None,
    log: SQLiteLog | PostgresLog,
) -> int:
    from . import build_worker  # start-up cost: large rebuilds only (and it imports build)

    *others, last = projections
    worker = build_worker.start({p.name: paths[p.name] for p in others}, log, head, log_id, batch)
    try:
        at = fold_into_files(source, [last], {last.name: paths[last.name]}, head, log_id, batch, progress, log)
        worker.result()  # the same position: both read the log by range to `head`
    except BaseException:
        worker.stop()
        for path in paths.values():
            remove_files(path)
        raise
    return at
