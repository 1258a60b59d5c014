"""Replaying views from zero while the live files serve: in place (all at once) or in a shadow file.

Both never serve a position lower than one already served; see `rollouts.projections.locks` for the
locks they hold and in which order."""

from __future__ import annotations

import contextlib
import gc
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from . import files, locks
from .projection import Projection

if TYPE_CHECKING:
    from pathlib import Path

    from .source import EventSource
    from .store import ProjectionStore

Progress = Callable[[int, int], None]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cycle collection during a rebuild: it makes no cycles, and it keeps many objects alive
    (a batch of records, the folds' rows), which each collection would walk again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def build_into(
    source: EventSource,
    projections: Sequence[Projection],
    paths: dict[str, Path],
    head: int,
    log_id: str,
    progress: Progress | None = None,
) -> None:
    """Fold `projections` from zero to `head` into new files at `paths` (build.build, a rebuild's batches)."""
    from . import build  # rebuilds only: not on every read's import path

    build.build(source, projections, paths, head, log_id, build.REBUILD_BATCH, progress)


def in_place(store: ProjectionStore, projections: Sequence[Projection], progress: Progress | None) -> None:
    """Replay from zero into new files while the live ones serve but cannot move, then swap.

    One read and decode of the log for every projection (see build). The catalog's write
    lock is held throughout, as for shadow builds, and so is each live file's: no catch-up
    moves them meanwhile, so the new files never serve a position lower than they did.
    """
    for p in projections:
        store.db(p.name)  # a file to hold, created when missing (that takes the catalog lock)
    with locks.build(store.catalog):  # lock 2's flock; its transaction is committed below while lock 3 is held
        catalog = store.catalog.db
        catalog.execute("BEGIN IMMEDIATE")
        try:
            with contextlib.ExitStack() as stack:
                for p in projections:  # the current files, as seen under the catalog lock
                    stack.enter_context(locks.view_write(store.db(p.name)))
                    store.catalog.remove_strays(p.name, keep={store.catalog.current(p.name)})  # type: ignore[arg-type]
                paths = {p.name: store.catalog.next_file(p.name) for p in projections}
                head = store.source.head()
                store._log_id = None
                build_into(store.source, projections, paths, head, store.log_id(), progress)
                for p in projections:
                    store.catalog.point(p.name, paths[p.name])
                catalog.execute("COMMIT")  # the swap, while the live files still cannot move
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # (a catalog corrupted meanwhile may refuse even this)
                if catalog.conn.in_transaction:
                    catalog.execute("ROLLBACK")
            raise
    for p in projections:
        store._open.pop(p.name)[1].close()
    with locks.catalog_write(store.catalog):  # lock 2 again; not a stray of a build in progress: builds hold it
        for p in projections:  # what is current now: a twin's rebuild may have swapped since ours
            store.catalog.remove_strays(p.name, keep={store.catalog.current(p.name)})  # type: ignore[arg-type]


def shadow(store: ProjectionStore, p: Projection, progress: Progress | None) -> None:
    """Build a new file while the live one serves, then swap once it is not behind.

    The catalog's write lock is held throughout: shadow builds of one folder run one at
    a time, so none picks another's file name or deletes another's file in progress.
    """
    live = store.db(p.name)
    with locks.catalog_write(store.catalog):
        path = store.catalog.next_file(p.name)
        new = store._new_file(p, path)
        store._log_id = None
        head = store.source.head()
        for batch, last in store._batches(0, head):
            store._apply(p, new, batch, last)
            if progress:
                progress(last, head)
        with locks.view_write(live):  # hold live catch-ups while the shadow passes the live position
            live_at = files.tracked(live, p.name)
            # A live view ahead of the log (or of another log) is wrong: pass the head, not it.
            target = min(live_at.position, store.source.head()) if live_at else 0
            shadow_at = files.tracked(new, p.name)
            for batch, last in store._batches(shadow_at.position if shadow_at else 0, target):
                store._apply(p, new, batch, last)
            store.catalog.point(p.name, path)
        # Still under the lock: a stray now is old, never the next build's file.
        store.catalog.remove_strays(p.name, keep={path})
    new.close()
    store._open.pop(p.name, None)
